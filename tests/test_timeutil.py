"""Reading ISO 8601 date-times: any text is a moment or a ValueError, never another error."""

from datetime import datetime

from hypothesis import example, given
from hypothesis import strategies as st

from mapapi.timeutil import parse_timestamp

# Near-valid date-times: calendar, ordinal and week dates, fractions on any
# unit, offsets, and digits that are not ASCII ones.
DIGIT = "[0-9٠-٩]"
NEAR_VALID = (
    rf"\A{DIGIT}{{4}}-?(W{DIGIT}{{2}}-?{DIGIT}|{DIGIT}{{2,3}}(-?{DIGIT}{{2}})?)"
    rf"[Tt ]{DIGIT}{{2}}([:.,]?{DIGIT}{{1,4}}){{0,4}}([Zz]|[+-]{DIGIT}{{2}}(:?{DIGIT}{{2}})?)?\Z"
)


@given(st.from_regex(NEAR_VALID) | st.text())
@example("٢٠٣٠-١٥٢T10:00Z")  # an ordinal date in Arabic-Indic digits
@example("2030-06-01T١٠.5Z")
def test_any_text_is_a_whole_millisecond_utc_moment_or_a_value_error(text):
    try:
        moment = parse_timestamp(text)
    except ValueError:
        return
    assert isinstance(moment, datetime) and moment.tzinfo is None
    assert moment.microsecond % 1000 == 0
    assert all(character.isascii() for character in text if character.isdigit()), text
