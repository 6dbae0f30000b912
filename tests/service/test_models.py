"""The service's response models are made from the dataclasses they carry, so a field is declared once."""

from __future__ import annotations

import dataclasses

from neardup.database import Change, LabelRow
from neardup.service import models


def test_changes_and_labels_mirror_their_dataclasses() -> None:
    for model, source in ((models.Change, Change), (models.Label, LabelRow)):
        assert list(model.model_fields) == [f.name for f in dataclasses.fields(source)]
    assert models.Change.__name__ == "Change"
    assert models.Label.__name__ == "Label"
    assert models.Label.model_fields["labelled_at"].annotation is str  # JSON carries the ISO text
    assert not models.Change.model_fields["id"].is_required()
