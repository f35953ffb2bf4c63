"""The op battery (`torchneuron compat ops`): every OpInfo of PyTorch's op databases, each sample
run on neuron and on the CPU in four variants, judged case by case; reports/ops.{json,md}."""
