"""Seeded synthetic typed-decision data: lexicon, templates, paraphrases, standard and hard cases, and
`make_suites`, which writes the bundled suites byte for byte."""
