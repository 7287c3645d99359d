"""Skip the mutants whose source line matches a pattern of the config's
``[cosmic-ray.filters.source-filter] exclude-lines`` (regular expressions, searched in the
unmutated line at the mutation's start). Used for mutants that are equivalent by construction
(numba's ``cache=True`` / ``inline=...`` options: on-disk caching and inlining of compiled code,
with the JIT off in the run; performance-only chunk sizes). Each rule is listed with its reason
in the config. Usage: ``python source_filter.py SESSION CONFIG``."""

import re
import sys
from pathlib import Path

from cosmic_ray.config import load_config
from cosmic_ray.work_db import use_db
from cosmic_ray.work_item import WorkerOutcome, WorkResult

session, config_path = sys.argv[1], sys.argv[2]
patterns = load_config(config_path).sub("filters", "source-filter").get("exclude-lines", ())
if not patterns:
    sys.exit(0)
rule = re.compile("|".join(f"(?:{p})" for p in patterns))
lines: dict[str, list[str]] = {}
skipped = 0
with use_db(session) as db:
    for item in list(db.pending_work_items):
        for m in item.mutations:
            path = str(m.module_path)
            source = lines.setdefault(path, Path(path).read_text().splitlines())
            line = source[m.start_pos[0] - 1]
            if rule.search(line):
                db.set_result(
                    item.job_id,
                    WorkResult(
                        output=f"source filter: {line.strip()}",
                        worker_outcome=WorkerOutcome.SKIPPED,
                    ),
                )
                skipped += 1
                break
print(f"source filter: {skipped} mutants skipped")
