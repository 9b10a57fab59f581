"""Agent Skills adapters: SKILL.md front matter read with PyYAML, bundles read from zip archives."""
