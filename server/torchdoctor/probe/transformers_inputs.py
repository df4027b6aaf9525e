"""Example inputs for Hugging Face transformers models, from the model's own config.

Loaded by path by runner/; it reads attributes only and imports nothing of transformers.
A text model gets `input_ids` below its vocabulary size and an all-ones `attention_mask`
(plus `decoder_input_ids` for an encoder-decoder), an image model `pixel_values` of its
configured size. The sequence is capped by the model's position table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEFAULT_SEQUENCE = 128
POSITION_LIMITS = ("max_position_embeddings", "n_positions", "max_seq_len", "n_ctx")


@dataclass(frozen=True)
class KeywordTensor:
    name: str
    shape: tuple[int, ...]
    dtype: str
    low: int | None = None
    high: int | None = None


def is_transformers_model(model: Any) -> bool:
    return any(
        klass.__name__ == "PreTrainedModel" and klass.__module__.startswith("transformers")
        for klass in type(model).__mro__
    )


def vocabulary_size(model: Any, config: Any) -> int | None:
    size = getattr(config, "vocab_size", None)
    if isinstance(size, int) and size > 0:
        return size
    try:
        embedding = model.get_input_embeddings()
    except Exception:  # noqa: BLE001 - models without input embeddings raise all kinds
        return None
    size = getattr(embedding, "num_embeddings", None)
    return size if isinstance(size, int) and size > 0 else None


def sequence_length(config: Any) -> int:
    limits = [getattr(config, name, None) for name in POSITION_LIMITS]
    known = [limit for limit in limits if isinstance(limit, int) and limit > 0]
    return min([DEFAULT_SEQUENCE, *known])


def transformers_inputs(model: Any, batch: int) -> tuple[list[KeywordTensor], str] | None:
    """The keyword inputs and a sentence saying where they come from; None when the model
    is not a transformers model or its main input is of a kind not handled here."""
    if not is_transformers_model(model):
        return None
    config = getattr(model, "config", None)
    main = getattr(model, "main_input_name", "input_ids")
    if config is None:
        return None
    if main == "input_ids":
        vocab = vocabulary_size(model, config)
        if vocab is None:
            return None
        length = sequence_length(config)
        shape = (batch, length)
        tensors = [
            KeywordTensor("input_ids", shape, "int64", 0, vocab),
            KeywordTensor("attention_mask", shape, "int64", 1, 2),
        ]
        if getattr(config, "is_encoder_decoder", False):
            tensors.append(KeywordTensor("decoder_input_ids", shape, "int64", 0, vocab))
        detail = (
            f"{type(config).__name__}: token ids below vocab_size={vocab}, sequence {length} "
            "(capped by the position table), an all-ones attention mask"
        )
        return tensors, detail
    if main == "pixel_values":
        channels = getattr(config, "num_channels", 3)
        size = getattr(config, "image_size", 224)
        if isinstance(size, (list, tuple)):
            height, width = int(size[0]), int(size[-1])
        else:
            height = width = int(size)
        tensors = [KeywordTensor("pixel_values", (batch, int(channels), height, width), "float32")]
        detail = f"{type(config).__name__}: images of num_channels={channels}, image_size={size}"
        return tensors, detail
    return None
