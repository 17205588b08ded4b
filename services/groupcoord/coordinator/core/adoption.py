"""A group's adoption from the upstream cluster's own coordinator, decided once per group.

A platform team puts groupcoord in front of a cluster whose consumers already committed there,
in the brokers' ``__consumer_offsets``. The gateway, on the first touch of a group it has not
seen, asks the group's shard (``adopt_group``, no Kafka API): a group with state here (members,
offsets, pending transactional offsets) is ours and is only marked so; a group never held here
gets the committed offsets the gateway read from the upstream's coordinator, written as
ordinary offset records (so failover and standbys have them) with the decision in the same
batch. The decision (record 29) is never removed: a group deleted here later does not get the
upstream's old offsets back on its next touch.

Two gateways touching the same new group at once both read the upstream and both ask to
import; the partition's single writer answers the first and tells the second the group is
ours already, so the import happens once.
"""

from __future__ import annotations

from dataclasses import dataclass

from groupcoord.coordinator.core.contract import CoordinatorRecord, CoordinatorResult
from groupcoord.coordinator.core.offsets import CommittedOffset, offset_record
from groupcoord.coordinator.core.state import ActsOnState, GroupCoordinatorState
from groupcoord.records.v1 import offsets_pb2 as rpb
from groupcoord.rpc.v1 import offsets_pb2 as pb

HELD = rpb.GroupAdoptionValue.HELD
IMPORTED = rpb.GroupAdoptionValue.IMPORTED
_NO_RETENTION = -1  # an imported offset follows offsets.retention.minutes, as a commit does


@dataclass(frozen=True, slots=True)
class AdoptionDecision:
    """How a group became ours: ``HELD`` (it had state here first) or ``IMPORTED`` (with how
    many partitions' offsets, from an upstream group in ``upstream_state``)."""

    origin: int
    decided_at_ms: int
    imported_offsets: int = 0
    upstream_state: str = ""


def adoption_record(group_id: str, decision: AdoptionDecision) -> CoordinatorRecord:
    return CoordinatorRecord(
        rpb.GroupAdoptionKey(group_id=group_id),
        rpb.GroupAdoptionValue(
            origin=decision.origin,  # type: ignore[arg-type]
            decided_at_ms=decision.decided_at_ms,
            imported_offsets=decision.imported_offsets,
            upstream_state=decision.upstream_state,
        ),
    )


def replay_adoption(
    data: GroupCoordinatorState, key: rpb.GroupAdoptionKey, value: rpb.GroupAdoptionValue | None
) -> None:
    if value is None:  # never written; a compacted log keeps the decision
        data.adoptions.pop(key.group_id, None)
        return
    data.adoptions[key.group_id] = AdoptionDecision(
        value.origin, value.decided_at_ms, value.imported_offsets, value.upstream_state
    )


class GroupAdoptions(ActsOnState):
    """Answers ``adopt_group``: the one place a group's adoption is decided."""

    def __init__(self, data: GroupCoordinatorState) -> None:
        self.data = data

    def has_state(self, group_id: str) -> bool:
        """Whether anything of ``group_id`` lives here: a group (of any type), committed or
        pending transactional offsets."""
        data = self.data
        return (
            group_id in data.groups
            or group_id in data.offsets
            or data.transactions.group_has_pending(group_id)
        )

    def adopt(self, request: pb.AdoptGroupRequest, now_ms: int) -> CoordinatorResult[pb.AdoptGroupResponse]:
        group_id = request.group_id
        if group_id in self.data.adoptions:
            return CoordinatorResult(response=pb.AdoptGroupResponse(adoption=pb.AdoptGroupResponse.OURS))
        if self.has_state(group_id):
            return CoordinatorResult(
                records=[adoption_record(group_id, AdoptionDecision(HELD, now_ms))],
                response=pb.AdoptGroupResponse(adoption=pb.AdoptGroupResponse.OURS),
            )
        if request.check_only:
            return CoordinatorResult(
                response=pb.AdoptGroupResponse(adoption=pb.AdoptGroupResponse.NEEDS_IMPORT)
            )
        latest: dict[tuple[str, int], pb.ImportedOffset] = {}
        for imported in request.offsets:  # a partition named twice: the last one counts
            if imported.topic and imported.partition >= 0 and imported.offset >= 0:
                latest[(imported.topic, imported.partition)] = imported
        records = [
            offset_record(
                group_id,
                topic,
                partition,
                CommittedOffset(o.offset, o.leader_epoch, o.metadata, now_ms, _NO_RETENTION, b""),
            )
            for (topic, partition), o in latest.items()
        ]
        decision = AdoptionDecision(IMPORTED, now_ms, len(records), request.upstream_state)
        records.append(adoption_record(group_id, decision))
        return CoordinatorResult(
            records=records,
            response=pb.AdoptGroupResponse(
                adoption=pb.AdoptGroupResponse.IMPORTED, imported_offsets=len(latest)
            ),
        )
