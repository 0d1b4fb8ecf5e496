"""Serializers whose fields are built once per thread (``FieldsOncePerThread``) validate
each instance on its own: no data or error crosses from one to the next."""

from __future__ import annotations

import threading

from api.serializers.catalog import ReadinessPublishInputSerializer

GOOD = {"namespace": "s3://lake", "name": "raw/orders", "partition": "2026-11-28"}


def _validate(data: dict) -> tuple[bool, dict, dict]:
    serializer = ReadinessPublishInputSerializer(data=data)
    valid = serializer.is_valid()
    return valid, dict(serializer.validated_data) if valid else {}, dict(serializer.errors)


def test_instances_share_fields_but_never_data_or_errors():
    assert ReadinessPublishInputSerializer().fields is ReadinessPublishInputSerializer().fields
    bad = _validate({**GOOD, "manifest": {"expected_files": -1}})
    good = _validate({**GOOD, "manifest": {"expected_files": 2}})
    other = _validate({**GOOD, "state": "done", "typo": 1})

    assert bad[0] is False and set(bad[2]) == {"manifest"}
    assert bad[2]["manifest"]["expected_files"][0].code == "min_value"
    assert good == (
        True,
        {**GOOD, "state": "ready", "manifest": {"expected_files": 2}, "code_version": ""},
        {},
    )
    assert other[0] is False and set(other[2]) == {"typo"}
    assert _validate({**GOOD, "state": "done"})[2]["state"][0].code == "invalid_choice"


def test_each_thread_builds_its_own_fields():
    here = ReadinessPublishInputSerializer().fields
    there = []
    thread = threading.Thread(target=lambda: there.append(ReadinessPublishInputSerializer().fields))
    thread.start()
    thread.join()
    assert there[0] is not here
    assert list(there[0]) == list(here)
