"""Experience-model training: SFT on replay-store transitions (paper Eq. 5)."""
