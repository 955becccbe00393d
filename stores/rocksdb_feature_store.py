"""PyG FeatureStore over RocksDB: ``RocksDBRows`` (``rocksdb_rows.py``, which says how rows are
kept) with PyG's tensors and ``TensorAttr`` in front, for ingest and in-process use."""
from __future__ import annotations

import os
from pathlib import Path

from torch import Tensor
from torch_geometric.data import FeatureStore, TensorAttr

from gnnstore.common.attr_schema import AttrSchema
from gnnstore.common.tensor_rows import rows_tensor, tensor_rows
from gnnstore.stores.rocksdb_rows import RocksDBRows
from gnnstore.stores.row_index import check_group_name


class RocksDBFeatureStore(FeatureStore):
    """PyG FeatureStore over RocksDB (rocksdict): fixed-width rows keyed by global id.

    Args:
        path: the RocksDB directory (created when missing unless ``read_only``).
        read_only: open without the write lock; puts and removes raise ``PreconditionError``.
        follow: read-only, following another process's writes (``catch_up``).

    Attributes:
        rows: the store underneath, as numpy arrays (what the server reads and writes).
    """

    def __init__(self, path: str | os.PathLike, *, read_only: bool = False, follow: bool = False) -> None:
        super().__init__()
        self.rows = RocksDBRows(path, read_only=read_only, follow=follow)

    @classmethod
    def over(cls, rows: RocksDBRows) -> RocksDBFeatureStore:
        """PyG's FeatureStore over an open ``RocksDBRows`` (an ``open_stores`` result's
        ``feature_store``); closing either closes both."""
        store = cls.__new__(cls)
        FeatureStore.__init__(store)
        store.rows = rows
        return store

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({str(self.path)!r})"

    @property
    def path(self) -> Path:
        """The RocksDB directory."""
        return self.rows.path

    @property
    def read_only(self) -> bool:
        """Whether puts and removes are refused."""
        return self.rows.read_only

    def version(self) -> str:
        """An opaque token that changes on every put and remove and survives reopening."""
        return self.rows.version()

    def tensor_schema(self) -> list[AttrSchema]:
        """Dtype and shape of every stored (group_name, attr_name), read from metadata."""
        return self.rows.tensor_schema()

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        """One fresh ``TensorAttr`` per stored node attribute, with ``index=None``.

        Edge attributes are left out, as PyG's ``Data`` and ``HeteroData`` leave them out: PyG's
        loaders read every listed attribute at the batch's node ids (``tensor_schema()`` lists
        them all).
        """
        return [
            TensorAttr(group_name=s.group_name, attr_name=s.attr_name, index=None)
            for s in self.tensor_schema() if not s.is_edge
        ]

    def catch_up(self) -> None:
        """Read what the writer of a followed store (``follow=True``) wrote since the last call."""
        self.rows.catch_up()

    def copy_to(self, path: Path) -> None:
        """Copy the store, one consistent view of it, into a new database at ``path``."""
        self.rows.copy_to(path)

    def close(self) -> None:
        """Flush and close the store; it is unusable afterwards."""
        self.rows.close()

    def __enter__(self) -> RocksDBFeatureStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- PyG hooks -------------------------------------------------------------------------

    def _put_tensor(self, tensor: object, attr: TensorAttr) -> bool:
        group = check_group_name(attr.group_name)
        array, dtype = tensor_rows(tensor, f"feature {group!r}.{attr.attr_name!r}")
        return self.rows.write(group, attr.attr_name, array, dtype, attr.index)

    def _get_tensor(self, attr: TensorAttr) -> Tensor:
        group = check_group_name(attr.group_name)
        dtype = self.rows.dtype(group, attr.attr_name)
        return rows_tensor(self.rows.read(group, attr.attr_name, attr.index), dtype)

    def _multi_get_tensor(self, attrs: list[TensorAttr]) -> list[Tensor]:
        return [self._get_tensor(attr) for attr in attrs]

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        return self.rows.remove(attr.group_name, attr.attr_name)

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...] | None:
        return self.rows.size(attr.group_name, attr.attr_name)
