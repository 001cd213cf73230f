"""Screenshots of the target window with mss, on one worker thread."""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import threading

from handrail.executor.desktop._x11 import Rect


class Screenshots:
    """mss on one worker thread (an mss instance belongs to the thread that made it)."""

    def __init__(self, display: str) -> None:
        self._display = display
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="handrail-mss")
        self._local = threading.local()

    def _grab(self, rect: Rect, scale: float) -> bytes:
        import mss
        from PIL import Image

        sct = getattr(self._local, "sct", None)
        if sct is None:
            factory = getattr(mss, "MSS", None) or mss.mss
            sct = self._local.sct = factory(display=self._display)
        shot = sct.grab({"left": rect.x, "top": rect.y, "width": rect.width, "height": rect.height})
        image = Image.frombytes("RGB", shot.size, shot.rgb)
        if scale < 1.0:
            size = (max(1, round(rect.width * scale)), max(1, round(rect.height * scale)))
            image = image.resize(size, Image.Resampling.BILINEAR)
        out = io.BytesIO()
        image.save(out, "PNG", compress_level=1)
        return out.getvalue()

    async def grab(self, rect: Rect, scale: float) -> bytes:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._grab, rect, scale)

    def _close(self) -> None:
        sct = getattr(self._local, "sct", None)
        if sct is not None:
            sct.close()

    def close(self) -> None:
        self._pool.submit(self._close).result(5)
        self._pool.shutdown(wait=True)
