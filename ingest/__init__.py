"""Loading graphs into the stores: PyG objects, CSV/Parquet/.npy files, Planetoid, a generator."""
from gnnstore.ingest.file_source import ingest_files, read_graph_files
from gnnstore.ingest.generator import generate_graph, generate_hetero_graph
from gnnstore.ingest.graph_ingest import ingest_graph
from gnnstore.ingest.planetoid import load_planetoid
from gnnstore.ingest.report import IngestReport, IngestStep

__all__ = [
    "IngestReport",
    "IngestStep",
    "generate_graph",
    "generate_hetero_graph",
    "ingest_files",
    "ingest_graph",
    "load_planetoid",
    "read_graph_files",
]
