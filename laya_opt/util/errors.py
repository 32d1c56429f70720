"""Named error types of the public API; the CLI maps them to exit codes (`laya_opt.cli.contract`: bad input 2,
a pass failing 1).

Every input error is also a ValueError, so code that catches ValueError keeps working; its message
names the file, key path, tensor or question at fault. `InputWarning` is input accepted with a change
the user must see (temperatures clamped by spec §3.3); the CLI prints it as one `warning:` line.
"""
from __future__ import annotations


class LayaError(Exception):
    """Base of every error laya-opt raises on purpose."""


class InputError(LayaError, ValueError):
    """Bad input: a file, setting, tensor or question that cannot be used as given."""


class SchemaError(InputError):
    """A mapping (YAML, JSON, keyword arguments) does not fit the settings it is read into."""


class ConfigError(InputError):
    """An invalid encoder/config.json, rl_agent_config.json or tokenizer configuration."""


class CheckpointError(InputError):
    """A checkpoint directory that is missing, incomplete or whose tensors do not fit the model."""


class QuestionError(InputError):
    """A question definition or request that breaks the schema of spec §6."""


class ExperimentError(InputError):
    """An invalid experiment file; the message starts with the file and the key path."""


class SuiteError(InputError):
    """A malformed suite file; the message starts with `path:line:`."""


class PlanError(InputError):
    """A pass order the pass contracts refuse (a pass replaces a part an earlier pass captured)."""


class PassError(LayaError, RuntimeError):
    """A pass raised, or broke its contract (mutated its input, changed a part it did not declare)."""


class InputWarning(RuntimeWarning):
    """Input accepted as the spec says, but changed (e.g. a temperature clamped); the message names the file."""
