"""The model battery (`torchneuron compat models`): every Hugging Face architecture built tiny
from its config, plus real MiniLM weights, run on neuron against the CPU; reports/models.*.

- `command.py`: `torchneuron compat models`, the battery's entry.
- `catalog.py`: which architectures it tries, each with one head class and its family.
- `sample.py`: the fixed sample of architectures the default test suite runs.
- `check.py`: one architecture through the stages (build, forward, training step, generate).
- `jobs.py`: the battery on the shared worker pool, one architecture per unit.
- `report.py`: totals per stage and reports/models.{json,md,png}.
- `minilm.py`: real all-MiniLM-L6-v2 weights, on neuron against the CPU.
- `inputs.py`: the inputs (every modality, documented ones, image placeholders) and labels.
- `main_input.py`: the main input from the config, in the layouts the battery tries.
- `documented_shapes.py`: an input made from its documented type and shape.
- `input_basics.py`: batch and lengths, config values, token ids, forward's parameters.
- `input_widths.py`: feature widths the model's first projection names.

Tiny configs:
- `tiny_config.py`: a model type's tiny config, the steps below in order, validated by its class.
- `shrink.py`: a default config rewritten by key-name rules to a few small, consistent sizes.
- `follow_widths.py`: sizes that follow what shrank (stage widths, other parts' widths, rotary).
- `config_repairs.py`: a shrunk config its class rejects, repaired by the class's own rule.
- `tiny_sizes.py`: the tiny sizes and expert-count keys shrink.py and unset_sizes.py both read.
- `unset_sizes.py`: the profile for sizes the defaults leave unset and every checkpoint sets.
- `derived_again.py`: the profile for sizes a config derives when they are left unset.
- `timm_models.py`: a timm tower a config names, replaced by a tiny timm model of its layout.
- `timm_features.py`: channels, map sizes and patch grids beside a features_only timm tower.
- `missing_settings.py`: settings a model reads that its config class does not define.
- `hidden_factors.py`: the profile for a hidden size that keeps its default's factor of three."""
