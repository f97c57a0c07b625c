"""Split-learning VFL on torch (work in progress: see the split-learning issue)."""
