"""Print the surviving mutants of a cosmic-ray session with their source lines and diffs."""

import json
import subprocess
import sys
from pathlib import Path

dump = subprocess.run(
    [str(Path(sys.executable).with_name("cosmic-ray")), "dump", sys.argv[1]],
    capture_output=True,
    text=True,
    check=True,
).stdout
for line in dump.splitlines():
    item, result = json.loads(line)
    if not result or result.get("test_outcome") != "survived":
        continue
    for m in item["mutations"]:
        print(f"{m['module_path']}:{m['start_pos'][0]} {m['operator_name']} #{m['occurrence']}")
    print(result.get("diff", ""))
