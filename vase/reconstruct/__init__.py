"""Image-to-3D generators behind one interface (``image(s) -> GLB``): external commands for TripoSG and Hunyuan3D
(the paper's two candidates), and a procedural silhouette fit that runs anywhere. ``python -m vase.reconstruct``."""
