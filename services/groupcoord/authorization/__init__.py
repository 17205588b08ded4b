"""Kafka's ACL authorization for the group APIs the coordinator answers (see :mod:`.acls`)."""
