"""Hunyuan3D-2 as a command (it ships a Python API, not a CLI): run with the Python of a Hunyuan3D-2 checkout.

    /opt/Hunyuan3D-2/env/bin/python hunyuan3d_driver.py --image photo.png --output vase.glb [--texture]

Uses hy3dgen's shape pipeline (and paint pipeline with --texture) as its README shows; the background is removed
first when the photo has no alpha. vase calls it through reconstruct=hunyuan3d; it imports nothing from vase.
"""

import argparse

from PIL import Image


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--model", default="tencent/Hunyuan3D-2")
    ap.add_argument("--texture", action="store_true")
    a = ap.parse_args()
    # lazy: hy3dgen (optional)
    from hy3dgen.rembg import BackgroundRemover
    from hy3dgen.shapegen import Hunyuan3DDiTFlowMatchingPipeline

    image = Image.open(a.image)
    image = BackgroundRemover()(image.convert("RGB")) if image.mode != "RGBA" else image
    mesh = Hunyuan3DDiTFlowMatchingPipeline.from_pretrained(a.model)(image=image)[0]
    if a.texture:
        # lazy: hy3dgen (optional)
        from hy3dgen.texgen import Hunyuan3DPaintPipeline

        mesh = Hunyuan3DPaintPipeline.from_pretrained(a.model)(mesh, image=image)
    mesh.export(a.output)


if __name__ == "__main__":
    main()
