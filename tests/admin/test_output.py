"""What ``groupcoord groups`` prints, laid out as Kafka's ConsumerGroupCommand lays it out
(``printf`` formats with 15-character minimum name columns and a 10-character PARTITION), and
the ``--output json`` documents parsed back."""

from __future__ import annotations

import json

from aiokafka.structs import TopicPartition as Tp

from groupcoord.admin import output
from groupcoord.admin.consumer_groups import Coordinator, GroupDescription, Member, PartitionRow

GROUP = GroupDescription(
    "orders-app",
    "Stable",
    "consumer",
    (Member("m-1", "app-1", "10.0.0.1", (Tp("orders", 0), Tp("orders", 1), Tp("audit", 0))),),
    "range",
)
ROWS = [
    PartitionRow("orders-app", "orders", 0, 4, 10, 6, "m-1", "10.0.0.1", "app-1"),
    PartitionRow("orders-app", "a-much-longer-topic-name", 1, None, 3, None),
]


def test_offsets_table_has_kafkas_columns_and_widths() -> None:
    assert output.offsets_table(ROWS).splitlines() == [
        "GROUP           TOPIC                    PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID",
        "orders-app      orders                   0          4               10              6               m-1             10.0.0.1        app-1",
        "orders-app      a-much-longer-topic-name 1          -               3               -               -               -               -",
    ]
    verbose = output.offsets_table(ROWS, verbose=True).splitlines()
    assert verbose[0].split() == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "LEADER-EPOCH",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    assert verbose[1].split() == [
        "orders-app",
        "orders",
        "0",
        "-",
        "4",
        "10",
        "6",
        "m-1",
        "10.0.0.1",
        "app-1",
    ]


def test_members_table_plain_and_verbose() -> None:
    assert output.members_table(GROUP).splitlines() == [
        "GROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS",
        "orders-app      m-1             10.0.0.1        app-1           3",
    ]
    verbose = output.members_table(GROUP, verbose=True).splitlines()
    assert verbose[0].split()[-4:] == [
        "CURRENT-EPOCH",
        "CURRENT-ASSIGNMENT",
        "TARGET-EPOCH",
        "TARGET-ASSIGNMENT",
    ]
    assert verbose[1].split()[-4:] == ["-", "audit:0;orders:0,1", "-", "-"]


def test_state_table_names_the_coordinator_as_kafka_does() -> None:
    lines = output.state_table(GROUP, Coordinator(7, "127.0.0.1", 9092)).splitlines()
    assert lines == [
        "GROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE                #MEMBERS",
        "orders-app      127.0.0.1:9092  (7)       range                Stable               1",
    ]
    verbose = output.state_table(GROUP, Coordinator(7, "127.0.0.1", 9092), verbose=True).splitlines()
    assert verbose[0].split()[-3:] == ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]


def test_reset_and_list_tables_and_notices() -> None:
    plan = {"orders-app": {Tp("orders", 0): 3, Tp("orders", 1): 7}}
    assert output.reset_table(plan).splitlines() == [
        "GROUP           TOPIC           PARTITION  NEW-OFFSET",
        "orders-app      orders          0          3",
        "orders-app      orders          1          7",
    ]
    assert output.reset_table({}) == ""
    assert output.list_table([GROUP]).splitlines() == [
        "GROUP                     STATE",
        "orders-app                Stable",
    ]
    kip848 = GroupDescription("kip-848", "Empty", "consumer", (), "uniform", 3, 3)
    assert output.list_table([GROUP, kip848], types=True).splitlines() == [
        "GROUP                     TYPE                 STATE",
        "orders-app                Classic              Stable",
        "kip-848                   Consumer             Empty",
    ]
    assert output.list_table([kip848], types=True, states=False).splitlines()[1].split() == [
        "kip-848",
        "Consumer",
    ]
    assert (
        output.group_notice(GroupDescription("g", "Empty", "consumer"))
        == "Consumer group 'g' has no active members."
    )
    for state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
        assert (
            output.group_notice(GroupDescription("g", state, "consumer"))
            == "Warning: Consumer group 'g' is rebalancing."
        )
    assert output.group_notice(GROUP) is None


def test_delete_offsets_messages_and_table() -> None:
    assert (
        output.delete_offsets_summary("g", 0, "NONE")
        == "Request succeeded for deleting offsets from group g."
    )
    assert output.delete_offsets_summary("g", 68, "NON_EMPTY_GROUP") == "Error: The group is not empty."
    assert (
        output.delete_offsets_summary("g", 69, "GROUP_ID_NOT_FOUND") == "Error: The group id does not exist."
    )
    assert (
        output.delete_offsets_summary("g", 86, "GROUP_SUBSCRIBED_TO_TOPIC")
        == "Error: Encountered some partition-level error, see the follow-up details."
    )
    assert output.delete_offsets_summary("g", 15, "COORDINATOR_NOT_AVAILABLE") == (
        "Error: Encountered some unknown error: COORDINATOR_NOT_AVAILABLE"
    )
    table = output.delete_offsets_table(
        {Tp("orders", 5): 3, Tp("orders", 0): 0, Tp("gone", -1): 3}
    ).splitlines()
    assert table == [
        "TOPIC           PARTITION  STATUS",
        "gone            -          Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
        "This server does not host this topic-partition.",
        "orders          0          Successful",
        "orders          5          Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
        "This server does not host this topic-partition.",
    ]


def test_json_documents_parse_back_with_every_fact_of_the_tables() -> None:
    doc = json.loads(
        output.document(
            {
                "groups": [
                    {
                        **output.group_json(GROUP),
                        "offsets": output.offsets_json(ROWS),
                        "consumers": output.members_json(GROUP),
                    }
                ]
            }
        )
    )
    (group,) = doc["groups"]
    assert (group["group"], group["state"], group["assignment_strategy"], group["members"]) == (
        "orders-app",
        "Stable",
        "range",
        1,
    )
    assert group["offsets"][0] == {
        "topic": "orders",
        "partition": 0,
        "current_offset": 4,
        "log_end_offset": 10,
        "lag": 6,
        "consumer_id": "m-1",
        "host": "10.0.0.1",
        "client_id": "app-1",
    }
    assert group["offsets"][1]["current_offset"] is None and group["offsets"][1]["lag"] is None
    assert group["consumers"][0]["partitions"] == 3
    assert {(a["topic"], a["partition"]) for a in group["consumers"][0]["assignment"]} == {
        ("orders", 0),
        ("orders", 1),
        ("audit", 0),
    }
    assert json.loads(output.document(output.plan_json({Tp("t", 1): 5}))) == [
        {"topic": "t", "partition": 1, "offset": 5}
    ]


def test_a_kip848_member_shows_its_epochs_target_assignment_and_instance_id() -> None:
    group = GroupDescription(
        "g",
        "Reconciling",
        "consumer",
        (Member("m-1", "app", "10.0.0.1", (Tp("t", 0),), 7, (Tp("t", 0), Tp("t", 1)), "pod-0"),),
        "uniform",
        9,
        8,
    )
    lines = output.members_table(group, verbose=True).splitlines()
    assert lines[0].split() == [
        "GROUP",
        "CONSUMER-ID",
        "GROUP-INSTANCE-ID",
        "HOST",
        "CLIENT-ID",
        "#PARTITIONS",
        "CURRENT-EPOCH",
        "CURRENT-ASSIGNMENT",
        "TARGET-EPOCH",
        "TARGET-ASSIGNMENT",
    ]
    assert lines[1].split() == ["g", "m-1", "pod-0", "10.0.0.1", "app", "1", "7", "t:0", "8", "t:0,1"]
    state = output.state_table(group, Coordinator(0, "gw", 9092), verbose=True).splitlines()
    assert state[1].split() == ["g", "gw:9092", "(0)", "uniform", "Reconciling", "9", "8", "1"]
