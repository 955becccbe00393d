"""How many bytes a sampling request spends naming the rows a client cache holds: a list of ids
against the bitmap ``compact_ids`` picks when it is smaller, and the server's cost of each.

A ``static+sieve`` cache of 20% of a 1M-node graph's 100-float rows (the ``connect`` default)
has its dynamic tier filled by uniform misses; the request then names those ids. Also timed:
the server's mask of which of 150k sampled ids the client lacks, from the list (``np.isin``)
and from the bitmap.

    python -m benchmarks.known_ids
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from gnnstore.client.feature_cache import FeatureCache
from gnnstore.client.feature_exchange import FeatureExchange
from gnnstore.common.attr_schema import AttrSchema
from gnnstore.proto.feature_request import IdBitmap, feature_request_to_proto


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--sampled", type=int, default=150_000, help="node ids in one sample")
    args = parser.parse_args()
    n = args.nodes
    cache = FeatureCache(int(0.2 * n * 400), [AttrSchema(None, "x", torch.float32, (n, 100))], policy="static+sieve")
    rng = np.random.default_rng(0)
    rows = torch.zeros(n, 100)
    for _ in range(40):
        ids = torch.from_numpy(np.unique(rng.integers(0, n, 60_000)))
        cache.read_group(None, ["x"], ids, lambda missing: [rows[missing]])
    known = cache.known_ids(None, include_static=False, include_dynamic=True)
    as_list = feature_request_to_proto([(None, "x")], {None: known}).ByteSize()
    started = time.perf_counter()
    sent = FeatureExchange(lambda attrs: [rows[a.index] for a in attrs], cache).request([(None, "x")]).ByteSize()
    print(f"{known.numel():,} dynamic ids of {n:,} nodes known: {as_list / 1e3:.0f} kB as a list, "
          f"{sent / 1e3:.0f} kB as sent ({as_list / sent:.1f}x smaller; request built in "
          f"{(time.perf_counter() - started) * 1e3:.1f} ms)")
    sample = rng.integers(0, n, args.sampled)
    listed, bitmap = known.numpy(), IdBitmap.of(known.numpy())
    for name, lacking in (
        ("list (np.isin)", lambda: np.isin(sample, listed[(listed >= sample.min()) & (listed <= sample.max())],
                                           kind="table")),
        ("bitmap", lambda: bitmap.holds(sample)),
    ):
        lacking()
        started = time.perf_counter()
        for _ in range(20):
            lacking()
        print(f"server: which of {args.sampled:,} sampled ids are known, from the {name}: "
              f"{(time.perf_counter() - started) / 20 * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
