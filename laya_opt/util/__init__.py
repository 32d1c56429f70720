"""The ground floor: reading and validating files (JSON, YAML, schema), errors, where bundled files live,
staging directories, console output, progress and machine facts. Imports nothing else of laya_opt."""
