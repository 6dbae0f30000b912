"""The ingest pipeline: a batch's plan (``plan``) and the writer that carries it out (``writer``)."""

from neardup.ingest.plan import Batch, BatchPlan, plan_batch
from neardup.ingest.result import AddResult
from neardup.ingest.stages import StageClock
from neardup.ingest.writer import DEFAULT_BATCH_SIZE, Writer

__all__ = ["DEFAULT_BATCH_SIZE", "AddResult", "Batch", "BatchPlan", "StageClock", "Writer", "plan_batch"]
