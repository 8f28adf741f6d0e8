"""The vector index behind memory search: a small port, and its two Qdrant adapters.

The port (:mod:`.port`) is what the store asks of an index. Qdrant's in-process engine
(:mod:`.edge`, one process owns its folder: :mod:`.owner`) is the embedded default; qdrant-client
(:mod:`.server`) talks to a server when CAIRN_QDRANT_URL is set, or runs local mode in a folder
where the edge engine is not installed. :mod:`.adapter` is what the two adapters share.
"""

from __future__ import annotations

from pathlib import Path

from cairn.core.settings import Settings
from cairn.memory.index.edge import EdgeIndex
from cairn.memory.index.port import IndexedMemory, IndexUnavailable, VectorIndex
from cairn.memory.index.server import QdrantIndex

__all__ = [
    "EdgeIndex",
    "IndexUnavailable",
    "IndexedMemory",
    "QdrantIndex",
    "VectorIndex",
    "embedded_index",
    "index_for",
]


def index_for(settings: Settings, dense_dim: int | None) -> VectorIndex:
    """The index the settings describe: a Qdrant server, or the embedded engine in CAIRN_HOME."""
    if settings.qdrant_url:
        key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        return QdrantIndex(url=settings.qdrant_url, api_key=key, dense_dim=dense_dim)
    return embedded_index(settings.qdrant_path, dense_dim)


def embedded_index(path: Path, dense_dim: int | None) -> VectorIndex:
    """The embedded default's index in ``path``: Qdrant edge, else qdrant-client's local mode."""
    try:
        import qdrant_edge  # noqa: F401
    except ImportError:
        return QdrantIndex(path=path, dense_dim=dense_dim)
    return EdgeIndex(path, dense_dim=dense_dim)
