import pytest

from schedules import CronError, validate_cron


@pytest.mark.parametrize("expression", ["30 6 * * *", "*/15 * * * 1-5", " 0  0 1 * * "])
def test_validate_cron_accepts_five_fields(expression):
    validate_cron(expression)


@pytest.mark.parametrize(
    ("expression", "count"),
    [("0 0 * * * *", 6), ("0 0 * * * * 2026", 7), ("0 * * *", 4), ("@daily", 1)],
)
def test_validate_cron_refuses_any_other_field_count(expression, count):
    with pytest.raises(CronError, match=f"expected 5 fields .* got {count}"):
        validate_cron(expression)
