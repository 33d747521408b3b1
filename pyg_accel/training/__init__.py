"""Training steps without host overhead: a whole mini-batch step (forward, loss,
backward, optimizer step) replayed as a CUDA graph, on batches padded to a few shapes."""
from .padding import PaddedBatch, PaddedHeteroBatch, bucket_of
from .step import TrainStep

__all__ = ['TrainStep', 'PaddedBatch', 'PaddedHeteroBatch', 'bucket_of']
