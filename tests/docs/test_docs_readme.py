"""The README's claims that code can check: its two commands, its topic table."""

from __future__ import annotations

import re
from pathlib import Path

from peloton.bus.catalog import TOPICS

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_readme_opens_with_the_two_commands() -> None:
    first_block = re.search(r"```bash\n(.*?)```", README, re.S)
    assert first_block is not None
    commands = [line for line in first_block.group(1).splitlines() if line.strip()]
    assert commands == ["bash infra/setup.sh && task demo", "task test"]
    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    assert "task test" in ci and "infra/setup.sh" in ci


def test_readme_topic_table_matches_the_catalog() -> None:
    rows = re.findall(r"^\| `([a-z-]+)` \| (\S+) \| (\d+) \|", README, re.M)
    documented = {name: (key, int(parts)) for name, key, parts in rows}
    assert documented == {t.name: (t.key, t.partitions) for t in TOPICS}
