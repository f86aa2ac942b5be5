"""Partition counts are configuration (peloton.bus.partitions): PELOTON_TOPIC_PARTITIONS over
the catalog's defaults; a malformed setting is refused with the offending item."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.bus.catalog import TOPICS, Topic
from peloton.bus.partitions import ENV, configured, overrides, parse

KNOWN = {t.name for t in TOPICS}


def test_unset_keeps_the_catalog_defaults() -> None:
    assert overrides(KNOWN, {}) == {}
    (same,) = configured((TOPICS,), {})
    assert same == TOPICS


@given(st.dictionaries(st.sampled_from(sorted(KNOWN)), st.integers(1, 512), max_size=5),
       st.sampled_from([",", " ", ", "]))
def test_the_setting_overrides_exactly_the_topics_it_names(counts: dict[str, int],
                                                           sep: str) -> None:
    text = sep.join(f"{k}={v}" for k, v in counts.items())
    (topics,) = configured((TOPICS,), {ENV: text})
    for before, after in zip(TOPICS, topics, strict=True):
        assert after.partitions == counts.get(before.name, before.partitions)
        assert (after.name, after.key, after.events) == (before.name, before.key, before.events)


@pytest.mark.parametrize("text, problem", [
    ("task-launch-requested", "not topic=count"),
    ("nope=4", "unknown topic 'nope'"),
    ("task-launch-requested=x", "not an integer"),
    ("task-launch-requested=0", "at least one partition"),
])
def test_a_malformed_setting_is_refused_with_the_item(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse(text, KNOWN)


def test_groups_share_one_namespace() -> None:
    extra = (Topic("inbox", "k", 4, ()),)
    topics, inbox = configured((TOPICS[:1], extra), {ENV: "inbox=16"})
    assert inbox[0].partitions == 16 and topics == TOPICS[:1]


def test_the_catalog_applies_the_environment_at_import() -> None:
    code = ("from peloton.bus.catalog import topic; "
            "print(topic('task-launch-requested').partitions, "
            "topic('task-kill-requested').partitions, topic('job-submitted').partitions)")
    env = dict(os.environ, **{ENV: "task-launch-requested=64,task-kill-requested=32"})
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["64", "32", str(next(t for t in TOPICS if t.name == "job-submitted")
                                   .partitions)]
