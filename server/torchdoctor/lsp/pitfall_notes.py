"""Short notes for torch APIs with known pitfalls, shown in hovers (English and Simplified Chinese).

Each claim was checked against torch 2.13 (error texts quoted as torch prints them). A note is
keyed by what the hover resolved: a torch qualified name (through the file's imports), a method
name on a receiver whose type is unknown (`x.view(...)`), or a keyword argument of a noted call.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Note:
    title: str
    en: str
    zh: str
    # what jedi should describe for the signature and docstring
    describe: str | None = None

    def text(self, locale: str) -> str:
        return self.zh if locale == "zh-CN" else self.en


_VIEW_FAMILY_EN = (
    "returns a view with rearranged strides, not rearranged memory: the result is usually "
    'non-contiguous, so a following `.view()` raises "view size is not compatible with input '
    "tensor's size and stride\". Use `.reshape()`, or `.contiguous().view()`."
)
_VIEW_FAMILY_ZH = (
    "返回的是只改变步长（stride）的视图，内存并未重排：结果通常不连续，随后调用 `.view()` 会报错 "
    '"view size is not compatible with input tensor\'s size and stride"。请改用 `.reshape()`，'
    "或先 `.contiguous()` 再 `.view()`。"
)

NOTES: dict[str, Note] = {
    "view": Note(
        "Tensor.view",
        "`view` never copies: the new shape must be compatible with the tensor's strides. "
        'After `transpose`/`permute`/`t()`/`expand` it raises "view size is not compatible '
        "with input tensor's size and stride\"; call `.contiguous()` first, or use "
        "`.reshape()`, which copies only when it must.",
        "`view` 从不复制数据：新形状必须与张量的步长兼容。在 `transpose`/`permute`/`t()`/`expand` "
        '之后调用会报错 "view size is not compatible with input tensor\'s size and stride"；'
        "请先调用 `.contiguous()`，或改用只在必要时才复制的 `.reshape()`。",
        "torch.Tensor.view",
    ),
    "reshape": Note(
        "reshape",
        "`reshape` returns a view when the strides allow it and a copy otherwise, so writing "
        "into the result may or may not change the original. Use `.view()` when memory must be "
        "shared (it raises instead of copying) and `.clone()` when you need a copy.",
        "`reshape` 在步长允许时返回视图，否则返回副本，因此写入结果可能改变也可能不改变原张量。"
        "需要共享内存时用 `.view()`（不能共享时直接报错而不是复制），需要副本时用 `.clone()`。",
        "torch.Tensor.reshape",
    ),
    "contiguous": Note(
        "Tensor.contiguous",
        "`contiguous()` returns the tensor itself when it is already contiguous (no copy) and a "
        "contiguous copy otherwise. It is needed before `.view()` on a transposed or permuted "
        "tensor; most other operations accept non-contiguous input.",
        "`contiguous()` 在张量已连续时直接返回它本身（不复制），否则返回一个连续的副本。"
        "对转置或 permute 过的张量调用 `.view()` 之前需要它；其他大多数运算都接受不连续的输入。",
        "torch.Tensor.contiguous",
    ),
    "transpose": Note(
        "transpose",
        f"`transpose` {_VIEW_FAMILY_EN}",
        f"`transpose` {_VIEW_FAMILY_ZH}",
        "torch.Tensor.transpose",
    ),
    "permute": Note(
        "permute",
        f"`permute` {_VIEW_FAMILY_EN}",
        f"`permute` {_VIEW_FAMILY_ZH}",
        "torch.Tensor.permute",
    ),
    "backward": Note(
        "Tensor.backward",
        "`backward()` adds into the `.grad` of every leaf that requires grad; it does not "
        "overwrite, so zero the gradients once per step (`optimizer.zero_grad()`). It frees the "
        'graph: a second `backward()` through the same graph raises "Trying to backward through '
        'the graph a second time" unless the first call passed `retain_graph=True`. On a '
        'non-scalar tensor it needs a `gradient` argument ("grad can be implicitly created only '
        'for scalar outputs").',
        "`backward()` 会把梯度累加到每个需要梯度的叶子张量的 `.grad` 上，而不是覆盖，所以每一步都要"
        "清零一次梯度（`optimizer.zero_grad()`）。它会释放计算图：第二次对同一张图调用 "
        '`backward()` 会报错 "Trying to backward through the graph a second time"，'
        "除非第一次调用传入了 `retain_graph=True`。对非标量张量调用时需要传入 `gradient` 参数"
        '（"grad can be implicitly created only for scalar outputs"）。',
        "torch.Tensor.backward",
    ),
    "backward.retain_graph": Note(
        "backward(retain_graph=...)",
        "`retain_graph=True` keeps the tensors the graph saved, so a second `backward()` can go "
        "through it; their memory stays allocated until the graph is released. Use it only when "
        "a second backward really goes through the same graph.",
        "`retain_graph=True` 会保留计算图保存的张量，使第二次 `backward()` 可以再次穿过这张图；"
        "这些张量占用的内存会一直保留到图被释放为止。只有确实要第二次穿过同一张图时才使用它。",
        "torch.Tensor.backward",
    ),
    "zero_grad": Note(
        "zero_grad",
        "Since torch 2.0 `zero_grad()` sets `.grad` to `None` by default (`set_to_none=True`): "
        "it saves memory and a kernel, but code that reads `p.grad` right afterwards must handle "
        "`None`. Call it once per optimizer step before `backward()`; between `backward()` and "
        "`step()` it erases the gradients the step needs.",
        "从 torch 2.0 起，`zero_grad()` 默认把 `.grad` 设为 `None`（`set_to_none=True`）：这能节省"
        "内存和一次内核调用，但紧接着读取 `p.grad` 的代码必须处理 `None`。每个优化器步骤在 "
        "`backward()` 之前调用一次；若放在 `backward()` 与 `step()` 之间，会清掉这一步需要的梯度。",
        "torch.optim.Optimizer.zero_grad",
    ),
    "zero_grad.set_to_none": Note(
        "zero_grad(set_to_none=...)",
        "`set_to_none=False` fills the gradients with zeros instead of releasing them: one more "
        "memset per parameter, and the gradient memory stays allocated between steps.",
        "`set_to_none=False` 会把梯度填成 0 而不是释放它们：每个参数多一次内存清零，"
        "梯度占用的内存在两步之间也一直保留。",
        "torch.optim.Optimizer.zero_grad",
    ),
    "no_grad": Note(
        "torch.no_grad",
        "`torch.no_grad()` stops graph recording inside the block (or the decorated function): "
        "no memory for saved tensors, and results have `requires_grad=False`. It does not put "
        "dropout or batch norm into evaluation mode; call `model.eval()` for that. Unlike "
        "`inference_mode`, tensors created inside can later be used in autograd.",
        "`torch.no_grad()` 在代码块（或被装饰的函数）内停止记录计算图：不再为反向传播保存张量，"
        "结果的 `requires_grad=False`。它不会把 dropout 和 batch norm 切换到评估模式，那需要 "
        "`model.eval()`。与 `inference_mode` 不同，在其中创建的张量之后仍可参与自动求导。",
        "torch.no_grad",
    ),
    "inference_mode": Note(
        "torch.inference_mode",
        "`torch.inference_mode()` is a stricter, faster `no_grad`: tensors created inside are "
        'inference tensors, and using one in a graph outside the block raises "Inference '
        'tensors cannot be saved for backward". Use it for pure evaluation and `no_grad` when '
        "the results may feed training. Like `no_grad`, it does not replace `model.eval()`.",
        "`torch.inference_mode()` 是更严格、更快的 `no_grad`：在其中创建的是推理张量，在代码块外"
        '把它用于计算图会报错 "Inference tensors cannot be saved for backward"。纯评估时用它，'
        "结果还可能用于训练时用 `no_grad`。与 `no_grad` 一样，它不能代替 `model.eval()`。",
        "torch.inference_mode",
    ),
    "DataLoader": Note(
        "torch.utils.data.DataLoader",
        "`DataLoader` loads in the main process unless `num_workers > 0`. `shuffle=True` "
        "cannot be combined with `sampler=`, and `batch_sampler=` excludes `batch_size`, "
        "`shuffle`, `sampler` and `drop_last` (both raise ValueError). With `num_workers > 0` "
        "under the spawn start method (Windows, macOS) the loop must run under "
        '`if __name__ == "__main__":`.',
        "除非 `num_workers > 0`，`DataLoader` 都在主进程中加载数据。`shuffle=True` 不能与 "
        "`sampler=` 同时使用，`batch_sampler=` 与 `batch_size`、`shuffle`、`sampler`、`drop_last` "
        "互斥（都会抛出 ValueError）。在 spawn 启动方式下（Windows、macOS）使用 "
        '`num_workers > 0` 时，训练循环必须放在 `if __name__ == "__main__":` 之下。',
        "torch.utils.data.DataLoader",
    ),
    "DataLoader.num_workers": Note(
        "DataLoader(num_workers=...)",
        "Worker processes that load batches; 0 (the default) loads in the main process, in "
        "line with training. Under the spawn start method (Windows, macOS) workers re-import "
        'the main module: guard the training code with `if __name__ == "__main__":`. Each '
        "worker holds its own copy of the dataset object.",
        "加载批次的工作进程数；0（默认）表示在主进程中与训练串行加载。在 spawn 启动方式下"
        "（Windows、macOS）工作进程会重新导入主模块：请把训练代码放在 "
        '`if __name__ == "__main__":` 之下。每个工作进程都持有一份数据集对象的副本。',
        "torch.utils.data.DataLoader",
    ),
    "DataLoader.pin_memory": Note(
        "DataLoader(pin_memory=...)",
        'Copies each batch into page-locked memory so that `.to("cuda", non_blocking=True)` '
        "can overlap the copy with compute. It only helps when training on CUDA.",
        '把每个批次复制到锁页内存中，使 `.to("cuda", non_blocking=True)` 的拷贝能与计算重叠。'
        "只有在 CUDA 上训练时才有用。",
        "torch.utils.data.DataLoader",
    ),
    "DataLoader.shuffle": Note(
        "DataLoader(shuffle=...)",
        'Reshuffles the data every epoch. It cannot be combined with `sampler=` ("sampler '
        'option is mutually exclusive with shuffle"); with a `DistributedSampler`, shuffle in '
        "the sampler and call `sampler.set_epoch(epoch)` every epoch.",
        '每个 epoch 重新打乱数据。不能与 `sampler=` 同时使用（"sampler option is mutually '
        'exclusive with shuffle"）；使用 `DistributedSampler` 时应在采样器中打乱，并在每个 epoch '
        "调用 `sampler.set_epoch(epoch)`。",
        "torch.utils.data.DataLoader",
    ),
    "DataLoader.sampler": Note(
        "DataLoader(sampler=...)",
        "Decides the order of the indices and excludes `shuffle=True`. A `DistributedSampler` "
        "produces the same order every epoch unless `sampler.set_epoch(epoch)` is called at the "
        "start of each epoch.",
        "决定索引的顺序，不能与 `shuffle=True` 同时使用。除非在每个 epoch 开始时调用 "
        "`sampler.set_epoch(epoch)`，`DistributedSampler` 每个 epoch 都给出相同的顺序。",
        "torch.utils.data.DataLoader",
    ),
    "DataLoader.batch_sampler": Note(
        "DataLoader(batch_sampler=...)",
        "Yields whole batches of indices; it cannot be combined with `batch_size`, `shuffle`, "
        '`sampler` or `drop_last` ("batch_sampler option is mutually exclusive with batch_size, '
        'shuffle, sampler, and drop_last").',
        "直接产出整批索引；不能与 `batch_size`、`shuffle`、`sampler`、`drop_last` 同时使用"
        '（"batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and '
        'drop_last"）。',
        "torch.utils.data.DataLoader",
    ),
    "DataLoader.persistent_workers": Note(
        "DataLoader(persistent_workers=...)",
        "Keeps the worker processes alive between epochs, saving their start-up time. It needs "
        '`num_workers > 0`: with 0 it raises "persistent_workers option needs num_workers > 0".',
        "在各个 epoch 之间保留工作进程，省去重新启动的时间。需要 `num_workers > 0`：为 0 时会报错 "
        '"persistent_workers option needs num_workers > 0"。',
        "torch.utils.data.DataLoader",
    ),
    "DataLoader.prefetch_factor": Note(
        "DataLoader(prefetch_factor=...)",
        "Batches each worker loads ahead (2 by default when `num_workers > 0`). Setting it with "
        '`num_workers=0` raises ValueError ("prefetch_factor option could only be specified in '
        'multiprocessing").',
        "每个工作进程预先加载的批次数（`num_workers > 0` 时默认为 2）。在 `num_workers=0` 时设置它"
        '会抛出 ValueError（"prefetch_factor option could only be specified in '
        'multiprocessing"）。',
        "torch.utils.data.DataLoader",
    ),
    "DataLoader.drop_last": Note(
        "DataLoader(drop_last=...)",
        "Drops the last incomplete batch. Without it the last batch can be smaller, which "
        "breaks code that assumes a fixed batch size, and batch norm in training mode raises on "
        'a batch of one ("Expected more than 1 value per channel when training").',
        "丢弃最后一个不完整的批次。不丢弃时最后一批可能更小，会破坏假定批大小固定的代码；"
        '训练模式下的 batch norm 遇到只有一个样本的批次会报错（"Expected more than 1 value per '
        'channel when training"）。',
        "torch.utils.data.DataLoader",
    ),
    "to": Note(
        "to",
        "`Tensor.to()` returns a new tensor and leaves the original where it was: `x.to(device)` "
        "on a line of its own does nothing, write `x = x.to(device)`. `Module.to()` moves the "
        "module's parameters in place (and returns the module). With `non_blocking=True` a copy "
        "from pinned memory can overlap compute.",
        "`Tensor.to()` 返回一个新张量，原张量留在原处：单独一行的 `x.to(device)` 什么也不做，"
        "应写成 `x = x.to(device)`。`Module.to()` 则会就地移动模块的参数（并返回模块本身）。"
        "配合 `non_blocking=True`，从锁页内存的拷贝可以与计算重叠。",
        "torch.Tensor.to",
    ),
    "cuda": Note(
        "cuda",
        "`x.cuda()` returns a copy on the GPU and the tensor itself stays on the CPU: write "
        "`x = x.cuda()`. On a module it moves the parameters in place. `x.to(device)` keeps the "
        "code runnable on machines without a GPU.",
        "`x.cuda()` 返回 GPU 上的副本，张量本身仍留在 CPU 上：应写成 `x = x.cuda()`。对模块调用时"
        "会就地移动参数。使用 `x.to(device)` 可以让代码在没有 GPU 的机器上也能运行。",
        "torch.Tensor.cuda",
    ),
    "item": Note(
        "Tensor.item",
        "`item()` copies a one-element tensor into a Python number. On a GPU it waits for every "
        "queued kernel (a device synchronisation), so calling it on every step stalls the "
        "pipeline. Accumulating a loss with `.item()` (or `.detach()`) also lets each step's "
        "graph be freed.",
        "`item()` 把只有一个元素的张量复制成 Python 数值。在 GPU 上它要等待所有排队的内核执行完"
        "（一次设备同步），因此每一步都调用会拖慢流水线。用 `.item()`（或 `.detach()`）累加损失"
        "还能让每一步的计算图被释放。",
        "torch.Tensor.item",
    ),
    "detach": Note(
        "Tensor.detach",
        "`detach()` returns a tensor that shares storage with the original but is outside the "
        "graph: no gradient flows through it, and changing it in place changes the original "
        '(a later backward can then fail with "one of the variables needed for gradient '
        'computation has been modified by an inplace operation"). Use `.detach().clone()` for '
        "an independent copy.",
        "`detach()` 返回一个与原张量共享存储、但不在计算图中的张量：梯度不会流过它，"
        '对它的就地修改也会改变原张量（之后的 backward 可能报错 "one of the variables needed for '
        'gradient computation has been modified by an inplace operation"）。需要独立副本时请用 '
        "`.detach().clone()`。",
        "torch.Tensor.detach",
    ),
    "numpy": Note(
        "Tensor.numpy",
        "`numpy()` shares memory with a CPU tensor: changing one changes the other. It raises "
        'for a tensor that requires grad ("Can\'t call numpy() on Tensor that requires grad"; '
        "use `.detach().numpy()`) and for a GPU tensor (call `.cpu()` first).",
        "`numpy()` 与 CPU 张量共享内存：改动其中一个会改变另一个。对需要梯度的张量调用会报错"
        '（"Can\'t call numpy() on Tensor that requires grad"，请用 `.detach().numpy()`），'
        "对 GPU 张量调用也会报错（请先 `.cpu()`）。",
        "torch.Tensor.numpy",
    ),
    "eval": Note(
        "Module.eval",
        "`model.eval()` switches dropout, batch norm and similar layers to evaluation "
        "behaviour. It does not stop gradient recording: wrap evaluation in `torch.no_grad()` "
        "or `torch.inference_mode()` as well, and call `model.train()` before training resumes.",
        "`model.eval()` 把 dropout、batch norm 等层切换到评估行为。它不会停止记录计算图："
        "评估时还应放在 `torch.no_grad()` 或 `torch.inference_mode()` 中，并在恢复训练前调用 "
        "`model.train()`。",
        "torch.nn.Module.eval",
    ),
    "train": Note(
        "Module.train",
        "`model.train()` switches dropout and batch norm back to training behaviour after "
        "`eval()`; `model.train(False)` is the same as `model.eval()`.",
        "`model.train()` 在 `eval()` 之后把 dropout 和 batch norm 切回训练行为；"
        "`model.train(False)` 等同于 `model.eval()`。",
        "torch.nn.Module.train",
    ),
    "load": Note(
        "torch.load",
        "Since torch 2.6 `torch.load` defaults to `weights_only=True`: it loads tensors and "
        "plain containers and refuses other pickled objects. `weights_only=False` unpickles "
        "anything, which can run code from the file: use it only for files you trust. "
        "`map_location=` loads a checkpoint saved on a GPU on a machine without one.",
        "从 torch 2.6 起，`torch.load` 默认 `weights_only=True`：只加载张量和普通容器，拒绝其他 "
        "pickle 对象。`weights_only=False` 会反序列化任意对象，可能执行文件中的代码：只对可信的文件"
        "使用。`map_location=` 可以在没有 GPU 的机器上加载在 GPU 上保存的检查点。",
        "torch.load",
    ),
    "load.weights_only": Note(
        "torch.load(weights_only=...)",
        "`True` (the default since torch 2.6) restricts unpickling to tensors and plain "
        "containers. `False` runs the full unpickler, which can execute arbitrary code from the "
        "file: only for checkpoints you trust.",
        "`True`（torch 2.6 起的默认值）只允许反序列化张量和普通容器。`False` 使用完整的反序列化，"
        "可能执行文件中的任意代码：只用于可信的检查点。",
        "torch.load",
    ),
    "compile": Note(
        "torch.compile",
        "`torch.compile` compiles on the first call (seconds to minutes) and recompiles when "
        "input shapes, dtypes or Python values it depends on change. The keyword is `dynamic=` "
        '(not `dynamic_shapes=`); `mode=` is one of "default", "reduce-overhead", '
        '"max-autotune", "max-autotune-no-cudagraphs" (and "lite" on recent versions); '
        "`fullgraph=True` raises on graph breaks instead of falling back to Python.",
        "`torch.compile` 在第一次调用时编译（几秒到几分钟），当输入形状、dtype 或它依赖的 Python "
        "值变化时会重新编译。关键字是 `dynamic=`（不是 `dynamic_shapes=`）；`mode=` 取 "
        '"default"、"reduce-overhead"、"max-autotune"、"max-autotune-no-cudagraphs" 之一'
        '（较新版本还有 "lite"）；`fullgraph=True` 在图中断时直接报错，而不是退回 Python 执行。',
        "torch.compile",
    ),
    "relu": Note(
        "torch.nn.functional.relu",
        "`inplace=True` overwrites the input. When autograd saved that input for backward (for "
        'example the output of `sigmoid` or `exp`), backward raises "one of the variables '
        'needed for gradient computation has been modified by an inplace operation".',
        "`inplace=True` 会覆盖输入。如果自动求导为反向传播保存了这个输入（例如 `sigmoid` 或 "
        '`exp` 的输出），backward 会报错 "one of the variables needed for gradient computation '
        'has been modified by an inplace operation"。',
        "torch.nn.functional.relu",
    ),
}

# torch qualified names (as the file's imports spell them) → note
QUALNAME_NOTES: dict[str, str] = {
    "torch.Tensor.view": "view",
    "torch.Tensor.reshape": "reshape",
    "torch.reshape": "reshape",
    "torch.Tensor.contiguous": "contiguous",
    "torch.Tensor.transpose": "transpose",
    "torch.transpose": "transpose",
    "torch.Tensor.permute": "permute",
    "torch.permute": "permute",
    "torch.Tensor.backward": "backward",
    "torch.autograd.backward": "backward",
    "torch.Tensor.to": "to",
    "torch.nn.Module.to": "to",
    "torch.Tensor.cuda": "cuda",
    "torch.nn.Module.cuda": "cuda",
    "torch.Tensor.item": "item",
    "torch.Tensor.detach": "detach",
    "torch.Tensor.numpy": "numpy",
    "torch.optim.Optimizer.zero_grad": "zero_grad",
    "torch.nn.Module.zero_grad": "zero_grad",
    "torch.nn.Module.eval": "eval",
    "torch.nn.Module.train": "train",
    "torch.no_grad": "no_grad",
    "torch.autograd.no_grad": "no_grad",
    "torch.autograd.grad_mode.no_grad": "no_grad",
    "torch.inference_mode": "inference_mode",
    "torch.autograd.inference_mode": "inference_mode",
    "torch.autograd.grad_mode.inference_mode": "inference_mode",
    "torch.utils.data.DataLoader": "DataLoader",
    "torch.utils.data.dataloader.DataLoader": "DataLoader",
    "torch.load": "load",
    "torch.serialization.load": "load",
    "torch.compile": "compile",
    "torch.nn.functional.relu": "relu",
}

# a method called on a receiver of unknown type (`x.view(...)`, `model(x).item()`)
METHOD_NOTES: dict[str, str] = {
    name: name
    for name in (
        "view",
        "reshape",
        "contiguous",
        "transpose",
        "permute",
        "backward",
        "zero_grad",
        "to",
        "cuda",
        "item",
        "detach",
        "numpy",
        "eval",
        "train",
    )
}

# (note of the called API, keyword) → note of the argument
ARGUMENT_NOTES: dict[tuple[str, str], str] = {
    ("DataLoader", "num_workers"): "DataLoader.num_workers",
    ("DataLoader", "pin_memory"): "DataLoader.pin_memory",
    ("DataLoader", "shuffle"): "DataLoader.shuffle",
    ("DataLoader", "sampler"): "DataLoader.sampler",
    ("DataLoader", "batch_sampler"): "DataLoader.batch_sampler",
    ("DataLoader", "persistent_workers"): "DataLoader.persistent_workers",
    ("DataLoader", "prefetch_factor"): "DataLoader.prefetch_factor",
    ("DataLoader", "drop_last"): "DataLoader.drop_last",
    ("backward", "retain_graph"): "backward.retain_graph",
    ("zero_grad", "set_to_none"): "zero_grad.set_to_none",
    ("load", "weights_only"): "load.weights_only",
}


def note_for_qualname(qualname: str) -> str | None:
    return QUALNAME_NOTES.get(qualname)


def note_for_method(name: str) -> str | None:
    return METHOD_NOTES.get(name)


def note_for_argument(call_note: str, keyword: str) -> str | None:
    return ARGUMENT_NOTES.get((call_note, keyword))
