"""`torchdoctor probe` options that say how to build the model and at which precision."""

from __future__ import annotations

import argparse
from typing import Any

from .build_options import BuildOptions
from .client import ProbeArgumentError
from .init_args import InitArgumentError, parse_init
from .precision import MODEL_DTYPES


def add_build_arguments(parser: Any) -> None:
    parser.add_argument(
        "--init", metavar="JSON",
        help="keyword arguments for the model's __init__, e.g. '{\"num_classes\": 5}'; an "
        "argument typed as a transformers config may be an object of config fields",
    )
    parser.add_argument(
        "--factory", metavar="MODULE:FUNCTION",
        help="build the model by calling this zero-argument function (imported from the "
        "file's folder or project root), e.g. models.zoo:make_model",
    )
    parser.add_argument(
        "--dtype", metavar="DTYPE",
        help=f"convert the model and floating inputs: {', '.join(MODEL_DTYPES)} (or bf16, fp16)",
    )
    parser.add_argument(
        "--amp", action="store_true",
        help="run forward under torch.autocast: bfloat16 on CPU, float16 with a GradScaler "
        "on CUDA",
    )
    parser.add_argument(
        "--amp-dtype", metavar="DTYPE", help="the autocast dtype instead: bfloat16 or float16"
    )
    parser.add_argument(
        "--channels-last", action="store_true",
        help="convert the model and 4-D inputs to the channels-last memory format",
    )


def build_options_from_arguments(args: argparse.Namespace) -> BuildOptions:
    init = None
    if args.init is not None:
        try:
            init = parse_init(args.init)
        except InitArgumentError as exc:
            raise ProbeArgumentError(str(exc)) from None
    amp = args.amp_dtype or ("auto" if args.amp else None)
    return BuildOptions(init, args.factory, args.dtype, amp, args.channels_last)
