"""Kernels: NKI on the software NeuronCore (the language, the ISA and the hardware's rules, in
`kernels/nki/`) and `nki_op`, which makes an NKI kernel a PyTorch operator."""
