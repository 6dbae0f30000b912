"""The ingest pipeline. ``writer``: the per-batch transaction loop of ``add``, ``remove`` and
``rebuild``; ``plan``: what a batch changes, decided in memory; ``reading``: batches read and
sketched ahead; ``members``: the ways of finding a batch's stored bucket members (probe, bulk,
deferred); ``verification``: candidate pairs verified, for ingest, query and check alike;
``prework``: a batch's work before its turn with other writers about; ``ahead``: the next batch's
contents written ahead; ``store``: the writer's statements; ``context``: what each step is given;
``stages``: timing the steps; ``parallel``: several writer processes; ``collection``: opening one."""

from neardup.ingest.plan import Batch, BatchPlan, plan_batch
from neardup.ingest.result import AddResult
from neardup.ingest.stages import StageClock
from neardup.ingest.writer import DEFAULT_BATCH_SIZE, Writer

__all__ = ["DEFAULT_BATCH_SIZE", "AddResult", "Batch", "BatchPlan", "StageClock", "Writer", "plan_batch"]
