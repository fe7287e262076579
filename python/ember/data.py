"""ember.data: Fashion-MNIST from Debian's IDX files and ember's seeded DataLoader (the one `ember train` uses)."""
from ._C.data import (  # noqa: F401
    Dataset, load_fashion_mnist, default_fashion_mnist_dir, images_to_input, FASHION_MNIST_CLASSES,
)
from ._C import data as _data


class DataLoader:
    """Batches (x, y) of a Dataset on `device`: x (B, *sample_shape) float32 in [0, 1], y (B) int64.

    Each `for x, y in loader` is the next epoch (0, 1, ...), shuffled by (seed, epoch) exactly as `ember train`
    shuffles; set_epoch(e) picks the epoch of the next iteration, like DistributedSampler.set_epoch."""

    def __init__(self, dataset, batch_size=128, shuffle=True, *, seed=0, drop_last=False, device=None,
                 pin_memory=True, sample_shape=()):
        self._loader = _data._DataLoader(dataset, batch_size, shuffle, seed, drop_last, device, pin_memory,
                                         list(sample_shape))
        self._next_epoch = 0

    def set_epoch(self, epoch):
        self._next_epoch = epoch

    def __len__(self):
        return len(self._loader)

    def __iter__(self):
        self._loader.start_epoch(self._next_epoch)
        self._next_epoch += 1
        while True:
            batch = self._loader.next()
            if batch is None:
                return
            yield batch
