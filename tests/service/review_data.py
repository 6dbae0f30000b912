"""Documents for the review pages' tests: news stories in paragraphs and edited copies of them
(a paragraph dropped, moved or rewritten, figures changed), so that their pairs spread over a
range of similarities, and one story that is copied exactly."""

from __future__ import annotations

from typing import Any

STORM = [
    "Storms cut power to 40,000 homes across the northern valley on Tuesday night, the regional grid "
    "operator said, after winds of more than 90 kilometres an hour brought down lines.",
    "Crews expect to restore most connections by Thursday, but rural lines may take longer because "
    "fallen trees still block several mountain roads.",
    "Schools in three districts will stay closed on Wednesday while roads are cleared, the education "
    "office said in a statement posted before dawn.",
    "The mayor asked residents to check on elderly neighbours and to report downed lines to the "
    "emergency number rather than approach them.",
]
COUNCIL = [
    "The city council approved the new budget on Monday after a long debate about library funding "
    "and the upkeep of parks in the eastern districts.",
    "Councillors voted eleven to four in favour, with the opposition arguing that the plan cuts "
    "opening hours at three branch libraries.",
    "The budget takes effect in January and will be reviewed again in the spring, the finance "
    "committee chair told reporters after the vote.",
]


def _story(paragraphs: list[str]) -> str:
    return "\n\n".join(paragraphs)


def documents() -> list[dict[str, Any]]:
    """Eleven documents: the storm story and seven edits of it, the council story, an edit of
    it and an exact copy of it."""
    s, c = STORM, COUNCIL
    figures = [p.replace("40,000", "42,000").replace("Thursday", "Friday") for p in s]
    reworded = [s[0], s[1].replace("most connections", "power to most homes"), s[2], s[3]]
    return [
        {
            "id": "storm/ap",
            "text": _story(s),
            "meta": {"title": "Storms cut power in the valley", "source": "AP"},
        },
        {"id": "storm/figures", "text": _story(figures), "meta": {"source": "Reuters"}},
        {"id": "storm/moved", "text": _story([s[0], s[2], s[3], s[1]])},
        {"id": "storm/short", "text": _story(s[:3])},
        {"id": "storm/shorter", "text": _story(s[:2])},
        {"id": "storm/reworded", "text": _story(reworded)},
        {"id": "storm/extra", "text": _story([*s, "Forecasters expect calmer weather by the weekend."])},
        {"id": "storm/lead", "text": _story([s[0], s[1]]) + " More to follow."},
        {"id": "council/1", "text": _story(c), "meta": {"headline": "Council passes budget"}},
        {"id": "council/2", "text": _story([c[0], c[2]])},
        {"id": "council/copy", "text": _story(c)},
    ]
