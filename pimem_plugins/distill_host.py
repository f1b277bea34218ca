"""The ``distill-host`` distiller: the model the host lends (pi: the cheapest model of the session).

Which of the host's models distils is decided in :mod:`pimem_core.runtime.host_model`; this distiller
answers when a host model is present and models are allowed. It is not asked when another
distiller is chosen by name (``PIMEM_DISTILLER``, ``PIMEM_USE``).
"""

from __future__ import annotations

from pimem_core.plugin import Distillation, DistillRequest, PimemError, hookimpl
from pimem_plugins.shared.distill_prompt import (
    NO_TEXT,
    SYSTEM_PROMPT,
    clean_bullets,
    nothing_to_keep,
)


@hookimpl
def pimem_distill_exchange(request: DistillRequest) -> Distillation | None:
    model = request.host_model
    if model is None or not request.models_allowed:
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
    distiller = f"host:{model.name}"
    if nothing_to_keep(reply or ""):
        return Distillation(text="", distiller=distiller, used_model=True, nothing_to_keep=True)
    text = clean_bullets(reply or "")
    if not text:
        raise PimemError(NO_TEXT)
    return Distillation(text=text, distiller=distiller, used_model=True)
