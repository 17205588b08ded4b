"""What the gateway asks of kio's entity classes (one per API version): the element type of a
tuple field, whether a version has a field, and the zero throttle every answer built here
carries. Shared by the group adapters, their authorization and the internal-topic refusals."""

from __future__ import annotations

import datetime
from typing import Any

from kio.static.primitive import i32Timedelta

NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


def element_type(entity_type: type[Any], field_name: str) -> type[Any]:
    """The element type of a tuple field of a kio entity."""
    return entity_type.__dataclass_fields__[field_name].type.__args__[0]  # type: ignore[no-any-return]


def has_field(entity_type: type[Any], field_name: str) -> bool:
    """Whether this version of a kio entity has the field (versions add and drop fields)."""
    return field_name in entity_type.__dataclass_fields__
