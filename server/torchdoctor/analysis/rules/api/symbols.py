"""Facts the api rules (TD701–TD715) need about torch, torchvision and transformers: which
symbols were removed or deprecated and when, what replaces them, which keywords `torch.compile`
takes, which weights `pretrained=True` loaded. Every entry was checked by running torch 2.13.0
(torchvision 0.28.0, transformers 5.24.0): a "removed" function raises when called, a
"deprecated" one warns when called or is marked deprecated in its documentation.

Plain data only; never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass

Version = tuple[int, int]


@dataclass(frozen=True)
class ApiSymbol:
    """A torch function that was removed or deprecated.

    rename: the qualified name of a drop-in replacement (same arguments, same result); None when
    the migration needs more than a new name (the rule then reports without a fix, or a special
    rewrite in the rule module handles the common call shapes).
    """

    qualname: str
    replacement: str  # what to use instead, as shown to the user
    deprecated_in: Version | None = None  # None: the version is not recorded in torch's message
    removed_in: Version | None = None  # removed: calling it raises since this version
    rename: str | None = None
    rename_is_safe: bool = True  # False: the new function differs in a way a user may notice
    evidence: str = "warns"  # "raises" | "warns" | "docs" (marked deprecated only in the docs)


def _symbols(*entries: ApiSymbol) -> dict[str, ApiSymbol]:
    return {entry.qualname: entry for entry in entries}


# ---- TD707 / TD708 ---------------------------------------------------------------------------
# Removed: calling them in torch 2.13 raises (RuntimeError from a stub, AttributeError, or a
# TypeError for `torch.fft`, now a module). `removed_in`: a release known to raise (the function
# may have gone a little earlier); before it the rules report the symbol as deprecated.
REMOVED = _symbols(
    ApiSymbol(
        "torch.solve",
        "torch.linalg.solve(A, B) (arguments swapped, no LU returned)",
        (1, 9),
        (1, 13),
        evidence="raises",
    ),
    ApiSymbol(
        "torch.symeig",
        "torch.linalg.eigh(A, UPLO='U') / torch.linalg.eigvalsh",
        (1, 9),
        (2, 0),
        evidence="raises",
    ),
    ApiSymbol(
        "torch.matrix_rank",
        "torch.linalg.matrix_rank (`symmetric` became `hermitian`)",
        (1, 9),
        (1, 13),
        evidence="raises",
    ),
    ApiSymbol(
        "torch.lstsq",
        "torch.linalg.lstsq(A, B) (arguments swapped)",
        (1, 9),
        (1, 13),
        evidence="raises",
    ),
    ApiSymbol(
        "torch.eig",
        "torch.linalg.eig / torch.linalg.eigvals (complex results)",
        (1, 9),
        (1, 13),
        evidence="raises",
    ),
    ApiSymbol(
        "torch.set_deterministic",
        "torch.use_deterministic_algorithms",
        (1, 8),
        (1, 13),
        rename="torch.use_deterministic_algorithms",
        evidence="raises",
    ),
    ApiSymbol(
        "torch.is_deterministic",
        "torch.are_deterministic_algorithms_enabled",
        (1, 8),
        (1, 13),
        rename="torch.are_deterministic_algorithms_enabled",
        evidence="raises",
    ),
    ApiSymbol(
        "torch.rfft", "torch.fft.rfft (returns a complex tensor)", (1, 7), (1, 8), evidence="raises"
    ),
    ApiSymbol(
        "torch.irfft", "torch.fft.irfft (takes a complex tensor)", (1, 7), (1, 8), evidence="raises"
    ),
    ApiSymbol("torch.ifft", "torch.fft.ifft (complex tensors)", (1, 7), (1, 8), evidence="raises"),
    ApiSymbol(
        "torch.fft", "torch.fft.fft (torch.fft is a module now)", (1, 7), (1, 8), evidence="raises"
    ),
)
# Modules that no longer exist: importing them raises ModuleNotFoundError.
REMOVED_MODULES: dict[str, tuple[Version, str]] = {
    "torch._six": ((2, 0), "`math.inf`, `str`, `collections.abc` (it held Python 2 shims)"),
}

DEPRECATED = _symbols(
    # linear algebra moved to torch.linalg
    ApiSymbol("torch.qr", "torch.linalg.qr (`some=False` became `mode='complete'`)", (1, 9)),
    ApiSymbol("torch.chain_matmul", "torch.linalg.multi_dot([a, b, ...])", (1, 9)),
    ApiSymbol(
        "torch.cholesky", "torch.linalg.cholesky (`upper=True`: `.mH` of the result)", (1, 9)
    ),
    ApiSymbol("torch.lu", "torch.linalg.lu_factor"),
    ApiSymbol("torch.lu_solve", "torch.linalg.lu_solve(LU, pivots, B) (arguments reordered)"),
    ApiSymbol("torch.triangular_solve", "torch.linalg.solve_triangular (arguments swapped)"),
    ApiSymbol("torch.svd", "torch.linalg.svd (returns Vh, not V)", evidence="docs"),
    ApiSymbol(
        "torch.norm", "torch.linalg.vector_norm / torch.linalg.matrix_norm", (1, 9), evidence="docs"
    ),
    ApiSymbol("torch.ger", "torch.outer", rename="torch.outer", evidence="docs"),
    ApiSymbol("torch.range", "torch.arange(start, end + 1) (torch.range includes `end`)"),
    ApiSymbol(
        "torch.set_default_tensor_type", "torch.set_default_dtype / set_default_device", (2, 1)
    ),
    ApiSymbol(
        "torch.testing.assert_allclose",
        "torch.testing.assert_close (stricter defaults)",
        (1, 12),
        rename="torch.testing.assert_close",
        rename_is_safe=False,
    ),
    # torch.nn
    ApiSymbol("torch.nn.UpsamplingNearest2d", "nn.Upsample(..., mode='nearest')", evidence="docs"),
    ApiSymbol(
        "torch.nn.UpsamplingBilinear2d",
        "nn.Upsample(..., mode='bilinear', align_corners=True)",
        evidence="docs",
    ),
    ApiSymbol(
        "torch.nn.functional.upsample", "F.interpolate", rename="torch.nn.functional.interpolate"
    ),
    ApiSymbol("torch.nn.functional.upsample_nearest", "F.interpolate(..., mode='nearest')"),
    ApiSymbol(
        "torch.nn.functional.upsample_bilinear",
        "F.interpolate(..., mode='bilinear', align_corners=True)",
    ),
    ApiSymbol(
        "torch.nn.utils.weight_norm",
        "torch.nn.utils.parametrizations.weight_norm "
        "(state_dict keys become parametrizations.weight.original0/1)",
        (2, 1),
        rename="torch.nn.utils.parametrizations.weight_norm",
        rename_is_safe=False,
    ),
    ApiSymbol(
        "torch.nn.utils.clip_grad_norm",
        "torch.nn.utils.clip_grad_norm_",
        rename="torch.nn.utils.clip_grad_norm_",
    ),
    ApiSymbol(
        "torch.nn.utils.stateless.functional_call",
        "torch.func.functional_call",
        (2, 0),
        rename="torch.func.functional_call",
    ),
    *(
        ApiSymbol(
            f"torch.nn.init.{name}",
            f"torch.nn.init.{name}_ (in place)",
            rename=f"torch.nn.init.{name}_",
        )
        for name in (
            "uniform",
            "normal",
            "constant",
            "eye",
            "dirac",
            "xavier_uniform",
            "xavier_normal",
            "kaiming_uniform",
            "kaiming_normal",
            "orthogonal",
            "sparse",
        )
    ),
    # backends, utilities, memory statistics
    ApiSymbol("torch.backends.cuda.sdp_kernel", "torch.nn.attention.sdpa_kernel([SDPBackend...])"),
    ApiSymbol(
        "torch.utils._pytree._register_pytree_node", "torch.utils._pytree.register_pytree_node"
    ),
    ApiSymbol(
        "torch.cuda.memory_cached",
        "torch.cuda.memory_reserved",
        rename="torch.cuda.memory_reserved",
    ),
    ApiSymbol(
        "torch.cuda.max_memory_cached",
        "torch.cuda.max_memory_reserved",
        rename="torch.cuda.max_memory_reserved",
    ),
    # functorch became torch.func in 2.0
    *(
        ApiSymbol(f"functorch.{name}", f"torch.func.{name}", (2, 0), rename=f"torch.func.{name}")
        for name in (
            "vmap",
            "grad",
            "grad_and_value",
            "vjp",
            "jvp",
            "jacrev",
            "jacfwd",
            "hessian",
            "functionalize",
        )
    ),
    ApiSymbol("functorch.make_functional", "torch.func.functional_call", (2, 0)),
    ApiSymbol("functorch.make_functional_with_buffers", "torch.func.functional_call", (2, 0)),
    ApiSymbol("functorch.combine_state_for_ensemble", "torch.func.stack_module_state", (2, 0)),
)

# The same functions reached through the module that defines them
# (`from torch.nn.utils.weight_norm import weight_norm`): in torch 2.13 each path below is the
# very object of the public name it maps to.
DEFINING_MODULE_PATHS: dict[str, str] = {
    "torch.functional.norm": "torch.norm",
    "torch.functional.chain_matmul": "torch.chain_matmul",
    "torch.functional.lu": "torch.lu",
    "torch.nn.utils.weight_norm.weight_norm": "torch.nn.utils.weight_norm",
    "torch.nn.utils.clip_grad.clip_grad_norm": "torch.nn.utils.clip_grad_norm",
    "torch.nn.modules.UpsamplingNearest2d": "torch.nn.UpsamplingNearest2d",
    "torch.nn.modules.UpsamplingBilinear2d": "torch.nn.UpsamplingBilinear2d",
    "torch.nn.modules.upsampling.UpsamplingNearest2d": "torch.nn.UpsamplingNearest2d",
    "torch.nn.modules.upsampling.UpsamplingBilinear2d": "torch.nn.UpsamplingBilinear2d",
    "torch.cuda.memory.memory_cached": "torch.cuda.memory_cached",
    "torch.cuda.memory.max_memory_cached": "torch.cuda.max_memory_cached",
}
DEPRECATED.update({path: DEPRECATED[public] for path, public in DEFINING_MODULE_PATHS.items()})

# ---- TD703 -----------------------------------------------------------------------------------
# torch.cuda.amp / torch.cpu.amp moved to torch.amp; torch 2.4 started warning (FutureWarning).
AMP_DEPRECATED_IN: Version = (2, 4)
AMP_SYMBOLS: dict[str, tuple[str, str]] = {
    # qualname: (kind, device)
    "torch.cuda.amp.autocast": ("autocast", "cuda"),
    "torch.cuda.amp.autocast_mode.autocast": ("autocast", "cuda"),
    "torch.cpu.amp.autocast": ("autocast", "cpu"),
    "torch.cpu.amp.autocast_mode.autocast": ("autocast", "cpu"),
    "torch.cuda.amp.GradScaler": ("GradScaler", "cuda"),
    "torch.cuda.amp.grad_scaler.GradScaler": ("GradScaler", "cuda"),
    "torch.cpu.amp.GradScaler": ("GradScaler", "cpu"),
    "torch.cpu.amp.grad_scaler.GradScaler": ("GradScaler", "cpu"),
    "torch.cuda.amp.custom_fwd": ("custom_fwd", "cuda"),
    "torch.cuda.amp.autocast_mode.custom_fwd": ("custom_fwd", "cuda"),
    "torch.cuda.amp.custom_bwd": ("custom_bwd", "cuda"),
    "torch.cuda.amp.autocast_mode.custom_bwd": ("custom_bwd", "cuda"),
}

# ---- TD712 -----------------------------------------------------------------------------------
# Non-public names with a public twin (the same object, or a subclass with no body), and the
# first torch version that has the public name.
PRIVATE_ALIASES: dict[str, tuple[str, Version]] = {
    "torch.utils.data._utils.collate.default_collate": (
        "torch.utils.data.default_collate",
        (1, 11),
    ),
    "torch.utils.data._utils.collate.default_convert": (
        "torch.utils.data.default_convert",
        (1, 11),
    ),
    "torch.utils.data._utils.worker.get_worker_info": ("torch.utils.data.get_worker_info", (1, 2)),
    "torch.optim.lr_scheduler._LRScheduler": ("torch.optim.lr_scheduler.LRScheduler", (2, 0)),
    "torch.distributed._composable.fsdp.fully_shard": (
        "torch.distributed.fsdp.fully_shard",
        (2, 6),
    ),
    "torch._dynamo.reset": ("torch.compiler.reset", (2, 1)),
    "torch._dynamo.allow_in_graph": ("torch.compiler.allow_in_graph", (2, 1)),
    "torch._dynamo.assume_constant_result": ("torch.compiler.assume_constant_result", (2, 1)),
    "torch._dynamo.list_backends": ("torch.compiler.list_backends", (2, 1)),
    "torch._dynamo.disable": ("torch.compiler.disable", (2, 1)),
    "torch._dynamo.is_compiling": ("torch.compiler.is_compiling", (2, 3)),
}
# Whole private modules whose public twin exports the same names.
PRIVATE_MODULES: dict[str, tuple[str, Version]] = {
    "torch.distributed._tensor": ("torch.distributed.tensor", (2, 5)),
}

# ---- TD705 -----------------------------------------------------------------------------------
# inspect.signature(torch.compile) in torch 2.13.0
COMPILE_KEYWORDS = frozenset(
    {
        "model",
        "fullgraph",
        "dynamic",
        "backend",
        "mode",
        "options",
        "name",
        "disable",
        "recompile_limit",
        "isolate_recompiles",
        "shapes_spec",
    }
)
# torch._inductor.list_mode_options() in torch 2.13.0
COMPILE_MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
# keywords people write that torch.compile never had, with the one they mean
COMPILE_KEYWORD_FIXES = {
    "dynamic_shapes": "dynamic",
    "full_graph": "fullgraph",
    "fullGraph": "fullgraph",
    "backends": "backend",
    "compile_mode": "mode",
    "modes": "mode",
    "option": "options",
}

# ---- TD706 -----------------------------------------------------------------------------------
# transformers.TrainingArguments keywords that were renamed; passing the old name raises
# "TrainingArguments.__init__() got an unexpected keyword argument ..." since the release shown.
TRAINING_ARGUMENT_RENAMES: dict[str, tuple[str, str]] = {
    "evaluation_strategy": ("eval_strategy", "4.51"),
    "per_gpu_train_batch_size": ("per_device_train_batch_size", "5.0"),
    "per_gpu_eval_batch_size": ("per_device_eval_batch_size", "5.0"),
    "no_cuda": ("use_cpu", "5.0"),
    "push_to_hub_token": ("hub_token", "5.0"),
}
TRAINING_ARGUMENT_CLASSES = frozenset(
    {
        "transformers.TrainingArguments",
        "transformers.training_args.TrainingArguments",
        "transformers.Seq2SeqTrainingArguments",
        "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
        # trl's configs are TrainingArguments subclasses and take the same keywords
        "trl.SFTConfig",
        "trl.DPOConfig",
        "trl.GRPOConfig",
        "trl.RewardConfig",
        "trl.KTOConfig",
        "trl.ORPOConfig",
    }
)

# ---- TD713 -----------------------------------------------------------------------------------
# Every torch.nn loss that still accepts the legacy `size_average` / `reduce` (torch 2.13.0).
LEGACY_REDUCTION_LOSSES = frozenset(
    {
        *(
            f"torch.nn.functional.{name}"
            for name in (
                "binary_cross_entropy",
                "binary_cross_entropy_with_logits",
                "cosine_embedding_loss",
                "cross_entropy",
                "hinge_embedding_loss",
                "kl_div",
                "l1_loss",
                "margin_ranking_loss",
                "mse_loss",
                "multi_margin_loss",
                "multilabel_margin_loss",
                "multilabel_soft_margin_loss",
                "nll_loss",
                "poisson_nll_loss",
                "smooth_l1_loss",
                "soft_margin_loss",
                "triplet_margin_loss",
            )
        ),
        *(
            f"torch.nn.{name}"
            for name in (
                "BCELoss",
                "BCEWithLogitsLoss",
                "CosineEmbeddingLoss",
                "CrossEntropyLoss",
                "HingeEmbeddingLoss",
                "KLDivLoss",
                "L1Loss",
                "MSELoss",
                "MarginRankingLoss",
                "MultiLabelMarginLoss",
                "MultiLabelSoftMarginLoss",
                "MultiMarginLoss",
                "NLLLoss",
                "NLLLoss2d",
                "PoissonNLLLoss",
                "SmoothL1Loss",
                "SoftMarginLoss",
                "TripletMarginLoss",
            )
        ),
    }
)

# ---- TD701 -----------------------------------------------------------------------------------
# torchvision 0.13 (torch 1.12) replaced `pretrained=` by `weights=`. For each builder, the
# weights `pretrained=True` (and `pretrained_backbone=True`) loads in torchvision 0.28, read
# from the builders' legacy-argument tables. The exact value matters: `weights="DEFAULT"` is
# newer, different weights for several models (resnet50: IMAGENET1K_V2, not V1).
TORCHVISION_MIN_TORCH: Version = (1, 12)
DEPENDS = "<depends on other arguments>"  # e.g. quantized models: on `quantize=`
NO_WEIGHTS = "<no weights>"  # pretrained=True raises "No weights available for model ..."
TORCHVISION_SUBPACKAGES = ("detection", "segmentation", "video", "optical_flow", "quantization")
# (sub-package or "", builder): (weights for pretrained=True[, weights for pretrained_backbone])
TORCHVISION_LEGACY_WEIGHTS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "alexnet"): ("IMAGENET1K_V1",),
    ("", "convnext_base"): ("IMAGENET1K_V1",),
    ("", "convnext_large"): ("IMAGENET1K_V1",),
    ("", "convnext_small"): ("IMAGENET1K_V1",),
    ("", "convnext_tiny"): ("IMAGENET1K_V1",),
    ("", "densenet121"): ("IMAGENET1K_V1",),
    ("", "densenet161"): ("IMAGENET1K_V1",),
    ("", "densenet169"): ("IMAGENET1K_V1",),
    ("", "densenet201"): ("IMAGENET1K_V1",),
    ("", "efficientnet_b0"): ("IMAGENET1K_V1",),
    ("", "efficientnet_b1"): ("IMAGENET1K_V1",),
    ("", "efficientnet_b2"): ("IMAGENET1K_V1",),
    ("", "efficientnet_b3"): ("IMAGENET1K_V1",),
    ("", "efficientnet_b4"): ("IMAGENET1K_V1",),
    ("", "efficientnet_b5"): ("IMAGENET1K_V1",),
    ("", "efficientnet_b6"): ("IMAGENET1K_V1",),
    ("", "efficientnet_b7"): ("IMAGENET1K_V1",),
    ("", "efficientnet_v2_l"): ("IMAGENET1K_V1",),
    ("", "efficientnet_v2_m"): ("IMAGENET1K_V1",),
    ("", "efficientnet_v2_s"): ("IMAGENET1K_V1",),
    ("", "googlenet"): ("IMAGENET1K_V1",),
    ("", "inception_v3"): ("IMAGENET1K_V1",),
    ("", "maxvit_t"): ("IMAGENET1K_V1",),
    ("", "mnasnet0_5"): ("IMAGENET1K_V1",),
    ("", "mnasnet0_75"): ("IMAGENET1K_V1",),
    ("", "mnasnet1_0"): ("IMAGENET1K_V1",),
    ("", "mnasnet1_3"): ("IMAGENET1K_V1",),
    ("", "mobilenet_v2"): ("IMAGENET1K_V1",),
    ("", "mobilenet_v3_large"): ("IMAGENET1K_V1",),
    ("", "mobilenet_v3_small"): ("IMAGENET1K_V1",),
    ("", "regnet_x_16gf"): ("IMAGENET1K_V1",),
    ("", "regnet_x_1_6gf"): ("IMAGENET1K_V1",),
    ("", "regnet_x_32gf"): ("IMAGENET1K_V1",),
    ("", "regnet_x_3_2gf"): ("IMAGENET1K_V1",),
    ("", "regnet_x_400mf"): ("IMAGENET1K_V1",),
    ("", "regnet_x_800mf"): ("IMAGENET1K_V1",),
    ("", "regnet_x_8gf"): ("IMAGENET1K_V1",),
    ("", "regnet_y_128gf"): (NO_WEIGHTS,),
    ("", "regnet_y_16gf"): ("IMAGENET1K_V1",),
    ("", "regnet_y_1_6gf"): ("IMAGENET1K_V1",),
    ("", "regnet_y_32gf"): ("IMAGENET1K_V1",),
    ("", "regnet_y_3_2gf"): ("IMAGENET1K_V1",),
    ("", "regnet_y_400mf"): ("IMAGENET1K_V1",),
    ("", "regnet_y_800mf"): ("IMAGENET1K_V1",),
    ("", "regnet_y_8gf"): ("IMAGENET1K_V1",),
    ("", "resnet101"): ("IMAGENET1K_V1",),
    ("", "resnet152"): ("IMAGENET1K_V1",),
    ("", "resnet18"): ("IMAGENET1K_V1",),
    ("", "resnet34"): ("IMAGENET1K_V1",),
    ("", "resnet50"): ("IMAGENET1K_V1",),
    ("", "resnext101_32x8d"): ("IMAGENET1K_V1",),
    ("", "resnext101_64x4d"): ("IMAGENET1K_V1",),
    ("", "resnext50_32x4d"): ("IMAGENET1K_V1",),
    ("", "shufflenet_v2_x0_5"): ("IMAGENET1K_V1",),
    ("", "shufflenet_v2_x1_0"): ("IMAGENET1K_V1",),
    ("", "shufflenet_v2_x1_5"): ("IMAGENET1K_V1",),
    ("", "shufflenet_v2_x2_0"): ("IMAGENET1K_V1",),
    ("", "squeezenet1_0"): ("IMAGENET1K_V1",),
    ("", "squeezenet1_1"): ("IMAGENET1K_V1",),
    ("", "swin_b"): ("IMAGENET1K_V1",),
    ("", "swin_s"): ("IMAGENET1K_V1",),
    ("", "swin_t"): ("IMAGENET1K_V1",),
    ("", "swin_v2_b"): ("IMAGENET1K_V1",),
    ("", "swin_v2_s"): ("IMAGENET1K_V1",),
    ("", "swin_v2_t"): ("IMAGENET1K_V1",),
    ("", "vgg11"): ("IMAGENET1K_V1",),
    ("", "vgg11_bn"): ("IMAGENET1K_V1",),
    ("", "vgg13"): ("IMAGENET1K_V1",),
    ("", "vgg13_bn"): ("IMAGENET1K_V1",),
    ("", "vgg16"): ("IMAGENET1K_V1",),
    ("", "vgg16_bn"): ("IMAGENET1K_V1",),
    ("", "vgg19"): ("IMAGENET1K_V1",),
    ("", "vgg19_bn"): ("IMAGENET1K_V1",),
    ("", "vit_b_16"): ("IMAGENET1K_V1",),
    ("", "vit_b_32"): ("IMAGENET1K_V1",),
    ("", "vit_h_14"): (NO_WEIGHTS,),
    ("", "vit_l_16"): ("IMAGENET1K_V1",),
    ("", "vit_l_32"): ("IMAGENET1K_V1",),
    ("", "wide_resnet101_2"): ("IMAGENET1K_V1",),
    ("", "wide_resnet50_2"): ("IMAGENET1K_V1",),
    ("detection", "fasterrcnn_mobilenet_v3_large_320_fpn"): ("COCO_V1", "IMAGENET1K_V1"),
    ("detection", "fasterrcnn_mobilenet_v3_large_fpn"): ("COCO_V1", "IMAGENET1K_V1"),
    ("detection", "fasterrcnn_resnet50_fpn"): ("COCO_V1", "IMAGENET1K_V1"),
    ("detection", "fasterrcnn_resnet50_fpn_v2"): ("COCO_V1", "IMAGENET1K_V1"),
    ("detection", "fcos_resnet50_fpn"): ("COCO_V1", "IMAGENET1K_V1"),
    ("detection", "keypointrcnn_resnet50_fpn"): (DEPENDS, "IMAGENET1K_V1"),
    ("detection", "maskrcnn_resnet50_fpn"): ("COCO_V1", "IMAGENET1K_V1"),
    ("detection", "maskrcnn_resnet50_fpn_v2"): ("COCO_V1", "IMAGENET1K_V1"),
    ("detection", "mobilenet_backbone"): (DEPENDS,),
    ("detection", "resnet_fpn_backbone"): (DEPENDS,),
    ("detection", "retinanet_resnet50_fpn"): ("COCO_V1", "IMAGENET1K_V1"),
    ("detection", "retinanet_resnet50_fpn_v2"): ("COCO_V1", "IMAGENET1K_V1"),
    ("detection", "ssd300_vgg16"): ("COCO_V1", "IMAGENET1K_FEATURES"),
    ("detection", "ssdlite320_mobilenet_v3_large"): ("COCO_V1", "IMAGENET1K_V1"),
    ("optical_flow", "raft_large"): ("C_T_SKHT_V2",),
    ("optical_flow", "raft_small"): ("C_T_V2",),
    ("quantization", "googlenet"): (DEPENDS,),
    ("quantization", "inception_v3"): (DEPENDS,),
    ("quantization", "mobilenet_v2"): (DEPENDS,),
    ("quantization", "mobilenet_v3_large"): (DEPENDS,),
    ("quantization", "resnet18"): (DEPENDS,),
    ("quantization", "resnet50"): (DEPENDS,),
    ("quantization", "resnext101_32x8d"): (DEPENDS,),
    ("quantization", "resnext101_64x4d"): (DEPENDS,),
    ("quantization", "shufflenet_v2_x0_5"): (DEPENDS,),
    ("quantization", "shufflenet_v2_x1_0"): (DEPENDS,),
    ("quantization", "shufflenet_v2_x1_5"): (DEPENDS,),
    ("quantization", "shufflenet_v2_x2_0"): (DEPENDS,),
    ("segmentation", "deeplabv3_mobilenet_v3_large"): ("COCO_WITH_VOC_LABELS_V1", "IMAGENET1K_V1"),
    ("segmentation", "deeplabv3_resnet101"): ("COCO_WITH_VOC_LABELS_V1", "IMAGENET1K_V1"),
    ("segmentation", "deeplabv3_resnet50"): ("COCO_WITH_VOC_LABELS_V1", "IMAGENET1K_V1"),
    ("segmentation", "fcn_resnet101"): ("COCO_WITH_VOC_LABELS_V1", "IMAGENET1K_V1"),
    ("segmentation", "fcn_resnet50"): ("COCO_WITH_VOC_LABELS_V1", "IMAGENET1K_V1"),
    ("segmentation", "lraspp_mobilenet_v3_large"): ("COCO_WITH_VOC_LABELS_V1", "IMAGENET1K_V1"),
    ("video", "mc3_18"): ("KINETICS400_V1",),
    ("video", "mvit_v1_b"): ("KINETICS400_V1",),
    ("video", "mvit_v2_s"): ("KINETICS400_V1",),
    ("video", "r2plus1d_18"): ("KINETICS400_V1",),
    ("video", "r3d_18"): ("KINETICS400_V1",),
    ("video", "s3d"): ("KINETICS400_V1",),
    ("video", "swin3d_b"): ("KINETICS400_V1",),
    ("video", "swin3d_s"): ("KINETICS400_V1",),
    ("video", "swin3d_t"): ("KINETICS400_V1",),
}
