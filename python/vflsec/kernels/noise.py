"""placeholder: replaced by the kernel implementation."""
NoiseGenerator = add_gaussian_noise = discrete_gaussian = gaussian_noise = None
