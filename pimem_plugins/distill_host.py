"""The ``distill-host`` distiller: the model the host lends (pi: the cheapest model of the session).

pimem never picks the host's model itself. The adapter resolves it, calling
:func:`resolve_capture_model` with the host's model catalog so the rule lives in one place, and
lends it as ``request.host_model``. This distiller answers when a host model is present, models
are allowed and ``PIMEM_DISTILLER`` is ``auto`` or ``host``.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from pimem_core import PimemError, hookimpl
from pimem_core.types import Distillation, DistillRequest
from pimem_plugins.distill_prompt import NO_TEXT, SYSTEM_PROMPT, clean_bullets


@attrs.frozen(kw_only=True)
class ModelRef:
    """One model of the host's catalog, with its price per token of input and output."""

    provider: str
    id: str
    input_cost: float = 0.0
    output_cost: float = 0.0

    @property
    def cost(self) -> float:
        return self.input_cost + self.output_cost


def resolve_capture_model(
    override: str | None, session_model: ModelRef | None, catalog: Sequence[ModelRef]
) -> ModelRef:
    """The model that distils a session's exchanges.

    :param override: ``PI_MEMSEARCH_CAPTURE_MODEL``: ``<provider>/<id>`` (split at the first
        slash, since ids may hold slashes) or a bare ``<id>`` (the first available model with
        that id). A model that is not available is an error, never a fallback.
    :param session_model: the model the session runs on.
    :param catalog: the available models, in the host's order.
    :returns: without an override, the cheapest available model of the session model's
        provider (input plus output cost, ties by id), else the session model itself.
    :raises PimemError: the override names no available model, or there is no model at all.
    """
    if override:
        if "/" in override:
            provider, model_id = override.split("/", 1)
            found = [m for m in catalog if m.provider == provider and m.id == model_id]
        else:
            found = [m for m in catalog if m.id == override]
        if not found:
            raise PimemError(f"capture model '{override}' not found in the model registry")
        return found[0]
    if session_model is None:
        raise PimemError(
            "no model available for distillation: no session model and no "
            "PI_MEMSEARCH_CAPTURE_MODEL set"
        )
    same_provider = [m for m in catalog if m.provider == session_model.provider]
    if not same_provider:
        return session_model
    return min(same_provider, key=lambda m: (m.cost, m.id))


@hookimpl
def pimem_distill_exchange(request: DistillRequest) -> Distillation | None:
    model = request.host_model
    if model is None or not request.models_allowed:
        return None
    if request.settings.distiller not in ("auto", "host"):
        return None
    timeout_ms = request.settings.distill_timeout_ms
    try:
        reply = model.complete(SYSTEM_PROMPT, request.exchange.transcript, timeout_ms / 1000)
    except PimemError:
        raise
    except TimeoutError as error:
        raise PimemError(f"distillation timed out after {timeout_ms}ms") from error
    except Exception as error:  # the host's model failed: its message is the reason
        raise PimemError(str(error) or type(error).__name__) from error
    text = clean_bullets(reply or "")
    if not text:
        raise PimemError(NO_TEXT)
    return Distillation(text=text, distiller=f"host:{model.name}", used_model=True)
