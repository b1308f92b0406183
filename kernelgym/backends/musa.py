"""Placeholder replaced by the GPU backends work."""
