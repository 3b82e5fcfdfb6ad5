"""Draft heads on the target's hidden states (Medusa, EAGLE): modules, folder format, trees."""
