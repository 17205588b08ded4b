"""Tests of TLS, SASL and the coordinator's self-protection on every hop."""
