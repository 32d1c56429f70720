"""The package version, in one place: the face re-exports it and `laya-opt --version` prints it."""

VERSION = "0.2.0"
