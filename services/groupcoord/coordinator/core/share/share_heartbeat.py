"""ShareGroupHeartbeat (KIP-932): join, stay, leave, and the session timeout.

Kafka's ``GroupMetadataManager.shareGroupHeartbeat`` in our habits: one function that reads
the group and returns records, a response and timer intents, never changing anything
itself. The member ids are the client's (ShareGroupHeartbeat v1: a UUID the consumer makes).

- Epoch 0 joins (or rejoins under the same id, creating the group if need be), -1 leaves,
  anything else must be the member's epoch — or the one before it, when the response that moved it on was lost (the member is
  then told its assignment again) — else FENCED_MEMBER_EPOCH; a member the group does not
  know is UNKNOWN_MEMBER_ID.
- A change the assignor would see bumps the group epoch; the next heartbeat of any member
  recomputes the target assignment (``simple`` assignor) for that epoch, and each member
  moves to it at its own next heartbeat, told its new assignment in the response.
- Every heartbeat re-arms the member's session timer; when it fires the member is removed as
  if it had left.

A group id held by a consumer or classic group is the dispatcher's to refuse (GROUP_ID_NOT_FOUND,
"Group x is not a share group", as Kafka answers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode

from groupcoord.coordinator.core.assignors.api import GroupSpec, MemberSpec
from groupcoord.coordinator.core.assignors.simple_assignor import SimpleAssignor
from groupcoord.coordinator.core.contract import (
    CancelTimer,
    CoordinatorRecord,
    CoordinatorResult,
    TimerIntent,
    deadline_timer,
)
from groupcoord.coordinator.core.share.share_group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    Partitions,
    ShareGroup,
    ShareGroupMember,
)
from groupcoord.coordinator.core.topics_image import TopicsImage
from groupcoord.rpc.v1 import share_group_pb2 as rpc

ASSIGNOR = SimpleAssignor()


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    """The share group configs, with Kafka's defaults."""

    session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.share.share_heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size


@dataclass(frozen=True, slots=True)
class ShareHeartbeat:
    """A ShareGroupHeartbeat request, decoded."""

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: Sequence[str] | None = None  # None: unchanged
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResponse:
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Mapping[bytes, Sequence[int]] | None = None  # None: unchanged


def session_timer_key(group_id: str, member_id: str) -> str:
    return f"share-session:{group_id}:{member_id}"


def _error(code: ErrorCode, message: str | None = None) -> CoordinatorResult:
    """An error answer as Kafka's: code and message, member id unset, epoch 0."""
    return CoordinatorResult(response=ShareHeartbeatResponse(code, message))


def _validate(request: ShareHeartbeat) -> str | None:
    """Kafka's ``throwIfShareGroupHeartbeatRequestIsInvalid``: the INVALID_REQUEST message ("":
    none; Kafka 4.4 answers an empty member id without one)."""
    if not request.group_id:
        return "GroupId can't be empty."
    if not request.member_id.strip():
        return ""
    if request.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        return f"MemberEpoch is {request.member_epoch}, but must be greater than or equal to -1."
    if request.member_epoch == JOIN_GROUP_MEMBER_EPOCH and not request.subscribed_topic_names:
        return "SubscribedTopicNames must be set in first request."
    return None


def _removal(group: ShareGroup, member_id: str) -> list[CoordinatorRecord]:
    """A member gone (left or expired): its records out, the group epoch up."""
    # the subscription hash is the next heartbeat's to refresh (it has the topics image)
    return [
        *group.member_tombstones(member_id),
        group.metadata_record(group.group_epoch + 1, group.metadata_hash),
    ]


def _target(
    group: ShareGroup, members: Mapping[str, ShareGroupMember], image: TopicsImage
) -> dict[str, Partitions]:
    """The simple assignor's assignment of ``members`` (stickiness from the current target)."""
    spec = GroupSpec(
        {
            m.member_id: MemberSpec(
                m.rack_id,
                frozenset(
                    tid for name in m.subscribed_topic_names if (tid := image.topic_id(name)) is not None
                ),
                group.target.get(m.member_id, {}),
            )
            for m in members.values()
        }
    )
    return {
        member_id: {t: frozenset(ps) for t, ps in assignment.items()}
        for member_id, assignment in ASSIGNOR.assign(spec, image).items()
    }


def heartbeat(
    group: ShareGroup | None,
    request: ShareHeartbeat,
    now_ms: int,
    config: ShareGroupConfig,
    image: TopicsImage,
    expire: Callable[[str, str, int], CoordinatorResult],
) -> CoordinatorResult[ShareHeartbeatResponse]:
    """Answer one ShareGroupHeartbeat. ``group`` is the share group of that id (None: none
    yet); ``expire(group_id, member_id, deadline_ms)`` is what the session timer runs (the
    shard's :func:`session_expired` over its current state)."""
    problem = _validate(request)
    if problem is not None:
        return _error(ErrorCode.invalid_request, problem or None)
    member_id, epoch = request.member_id, request.member_epoch
    if group is None:
        if epoch != JOIN_GROUP_MEMBER_EPOCH:  # Kafka's getOrMaybeCreateShareGroup
            return _error(ErrorCode.group_id_not_found, f"Share group {request.group_id} not found.")
        group = ShareGroup(request.group_id)
    member = group.members.get(member_id)
    if epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if member is None:
            return _error(
                ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {group.group_id}."
            )
        return CoordinatorResult(
            records=_removal(group, member_id),
            response=ShareHeartbeatResponse(member_id=member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH),
            timers=[CancelTimer(session_timer_key(group.group_id, member_id))],
        )
    if member is None:
        if epoch != JOIN_GROUP_MEMBER_EPOCH:
            return _error(
                ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {group.group_id}."
            )
        if len(group.members) >= config.max_size:
            return _error(
                ErrorCode.group_max_size_reached,
                f"The share group has reached its maximum capacity of {config.max_size} members.",
            )
        member = ShareGroupMember(member_id)
    elif epoch not in (JOIN_GROUP_MEMBER_EPOCH, member.member_epoch, member.previous_member_epoch):
        return _error(
            ErrorCode.fenced_member_epoch,
            f"The share group member has a member epoch ({epoch}) different from the one the coordinator "
            f"holds ({member.member_epoch}).",
        )

    records: list[CoordinatorRecord] = []
    updated = replace(
        member,
        rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
        client_id=request.client_id or member.client_id,
        client_host=request.client_host or member.client_host,
        subscribed_topic_names=tuple(sorted(set(request.subscribed_topic_names)))
        if request.subscribed_topic_names is not None
        else member.subscribed_topic_names,
    )
    members = {**group.members, member_id: updated}
    group_epoch, metadata_hash = group.group_epoch, group.metadata_hash
    subscription_changed = member_id not in group.members or (
        updated.subscribed_topic_names != member.subscribed_topic_names or updated.rack_id != member.rack_id
    )
    new_hash = image.metadata_hash(group.subscribed_topic_names(members))
    if subscription_changed or new_hash != metadata_hash:
        group_epoch, metadata_hash = group_epoch + 1, new_hash
        records.append(group.metadata_record(group_epoch, metadata_hash))
    target = group.target
    if group_epoch > group.assignment_epoch:
        target = _target(group, members, image)
        for m, partitions in target.items():
            if group.target.get(m) != partitions or m not in group.target:
                records.append(group.target_member_record(m, partitions))
        records.append(group.target_metadata_record(group_epoch))
        assignment_epoch = group_epoch
    else:
        assignment_epoch = group.assignment_epoch
    assigned = dict(target.get(member_id, {}))
    if updated.member_epoch != assignment_epoch:  # the target changes only with the epoch
        updated = replace(
            updated,
            member_epoch=assignment_epoch,
            previous_member_epoch=updated.member_epoch,
            assigned=assigned,
        )
    if updated != group.members.get(member_id):
        records.append(group.member_record(updated))
    tell = (
        epoch == JOIN_GROUP_MEMBER_EPOCH
        or epoch != updated.member_epoch
        or updated.assigned != member.assigned
    )
    response = ShareHeartbeatResponse(
        member_id=member_id,
        member_epoch=updated.member_epoch,
        heartbeat_interval_ms=config.heartbeat_interval_ms,
        assignment={t: sorted(ps) for t, ps in sorted(updated.assigned.items())} if tell else None,
    )
    timers: list[TimerIntent] = [
        deadline_timer(
            session_timer_key(group.group_id, member_id),
            config.session_timeout_ms,
            now_ms,
            expire,
            group.group_id,
            member_id,
        )  # fmt: skip
    ]
    return CoordinatorResult(records=records, response=response, timers=timers)


def session_expired(group: ShareGroup | None, member_id: str) -> CoordinatorResult[None]:
    """The session timer of ``member_id`` fired: remove it as if it had left (nothing, if it
    left or the group went in the meantime)."""
    if group is None or member_id not in group.members:
        return CoordinatorResult()
    return CoordinatorResult(records=_removal(group, member_id))


def timers_after_load(
    group: ShareGroup,
    now_ms: int,
    config: ShareGroupConfig,
    expire: Callable[[str, str, int], CoordinatorResult],
) -> list[TimerIntent]:
    """After a takeover every member of ``group`` gets a fresh session, as in Kafka (a session
    timer is not state: the new leader cannot know how long the old one had left)."""
    return [
        deadline_timer(
            session_timer_key(group.group_id, member_id),
            config.session_timeout_ms,
            now_ms,
            expire,
            group.group_id,
            member_id,
        )
        for member_id in group.members
    ]


# --- the Coordinator service's messages (proto/groupcoord/rpc/v1/share_group.proto) --------------


def from_request(request: rpc.ShareGroupHeartbeatRequest) -> ShareHeartbeat:
    return ShareHeartbeat(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        rack_id=request.rack_id if request.HasField("rack_id") else None,
        subscribed_topic_names=list(request.subscribed_topic_names.names)
        if request.HasField("subscribed_topic_names")
        else None,
        client_id=request.client_id,
        client_host=request.client_host,
    )


def to_response(response: ShareHeartbeatResponse) -> rpc.ShareGroupHeartbeatResponse:
    out = rpc.ShareGroupHeartbeatResponse(
        error_code=response.error_code.value,
        member_epoch=response.member_epoch,
        heartbeat_interval_ms=response.heartbeat_interval_ms,
    )
    if response.error_message is not None:
        out.error_message = response.error_message
    if response.member_id is not None:
        out.member_id = response.member_id
    if response.assignment is not None:
        out.assignment.SetInParent()  # present even when empty: "no partitions" is news too
        for topic_id, partitions in response.assignment.items():
            out.assignment.topic_partitions.add(topic_id=topic_id, partitions=partitions)
    return out
