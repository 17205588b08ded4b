"""Tests of the wheel, the container image built from the real Dockerfile, and deployments of it."""
