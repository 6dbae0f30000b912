"""The ingest pipeline. ``writer``: the per-batch transaction loop of ``add``, ``remove`` and
``rebuild``; ``plan``: what a batch changes, decided in memory; ``reading``: batches read and
sketched ahead; ``members``: the ways of finding a batch's stored bucket members (probe, bulk,
deferred); ``pairing``: a batch's candidates verified, linked into clusters and stored;
``prework``: a batch's work before its turn with other writers about; ``ahead``: the next batch's
contents written ahead; ``store``: the writer's statements; ``context``: what each step is given;
``parallel``: several writer processes; ``collection``: a writer opened by name. Verification
itself (``neardup.verification``) and stage timing (``neardup.stages``) live outside, shared with
the readers."""

from neardup.config import DEFAULT_BATCH_SIZE
from neardup.ingest.plan import Batch, BatchPlan, plan_batch
from neardup.ingest.writer import Writer
from neardup.result import AddResult
from neardup.stages import StageClock

__all__ = ["DEFAULT_BATCH_SIZE", "AddResult", "Batch", "BatchPlan", "StageClock", "Writer", "plan_batch"]
