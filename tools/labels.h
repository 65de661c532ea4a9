// ImageNet-1k class names, in the order of the 1000 logits (data/imagenet_classes.txt).
#pragma once

#include <string>
#include <vector>

namespace kiln::tools {

const std::vector<std::string>& imagenet_labels();

}  // namespace kiln::tools
