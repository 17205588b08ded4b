"""Kafka's API keys: the one place their numbers are written (Kafka's ``ApiKeys``).

Every module that branches on, routes by or tables an API names it through :class:`ApiKey`;
the numbers appear nowhere else. Members are named after kio's API names (``join_group`` ->
``JOIN_GROUP``) and their numbers are checked against kio's index by the test suite, so a
member can be neither misnumbered nor missing from the codec. The enum is written out rather
than generated from kio so that readers and type checkers see the names it has; only the APIs
the code uses are named (add a member when a module starts using one).
"""

from __future__ import annotations

from enum import IntEnum


class ApiKey(IntEnum):
    """A Kafka API key; compares and hashes as its number, so it keys tables read by the number
    a request header carries."""

    PRODUCE = 0
    FETCH = 1
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_CLUSTER = 60
    CONSUMER_GROUP_HEARTBEAT = 68  # KIP-848
    CONSUMER_GROUP_DESCRIBE = 69  # KIP-848
    SHARE_GROUP_HEARTBEAT = 76  # KIP-932
    SHARE_GROUP_DESCRIBE = 77  # KIP-932
    SHARE_FETCH = 78  # KIP-932
    SHARE_ACKNOWLEDGE = 79  # KIP-932
    STREAMS_GROUP_HEARTBEAT = 88  # KIP-1071
    STREAMS_GROUP_DESCRIBE = 89  # KIP-1071
    DESCRIBE_SHARE_GROUP_OFFSETS = 90  # KIP-932
    ALTER_SHARE_GROUP_OFFSETS = 91  # KIP-932
    DELETE_SHARE_GROUP_OFFSETS = 92  # KIP-932
