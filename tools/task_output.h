// `kiln run`'s presentation of segmentation and detection outputs: a text
// summary on stdout and a PNG (the class mask, or the photograph with the
// detected boxes drawn on it).
#pragma once

#include <kiln/model.h>
#include <kiln/tensor.h>

#include "image.h"

#include <string>
#include <vector>

namespace kiln::tools {

// For model.task() "segmentation" (outputs[0] is logits [N, classes, H, W]):
// prints the classes covering most pixels of the first image and writes the
// argmax mask as a colour PNG "<model>_mask.png". For "detection" (outputs
// "logits" [N, queries, classes + 1] with a trailing no-object class and
// "boxes" [N, queries, 4] as normalised cx, cy, w, h, or a detection list):
// prints the boxes scoring >= 0.5 (or the best 5, marked as below the
// threshold, if none does) in pixel coordinates of the photograph at
// image_path (`geometry`: where the model input's pixels came from in it), and writes "<model>_detections.png" with them drawn on it;
// image_path "" (inputs came from .npy files) reports boxes in the model
// input's pixels and draws nothing. <model> is the model's name made safe as
// a file name (file_stem_for). Pictures go to output_dir, which the caller
// has prepared (prepare_output_dir), or to the current folder when it is "";
// they are written atomically and their absolute path is printed. Other
// tasks print nothing. Throws kiln::Error (ShapeMismatch for unexpected
// outputs, Io when a picture cannot be written) naming the model or the file.
void report_task_outputs(const Model& model, const std::vector<Tensor>& outputs, const std::string& image_path,
                         const std::string& output_dir, const ImageGeometry& geometry = {});

}  // namespace kiln::tools
