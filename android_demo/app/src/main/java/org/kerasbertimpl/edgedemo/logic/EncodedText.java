package org.kerasbertimpl.edgedemo.logic;

/**
 * One packed model input: [CLS] pieces [SEP] (+ pieces [SEP]) padded with [PAD], as
 * BertPreprocessor packs it, plus what the app tells the user about it.
 */
public final class EncodedText {
    /** int32 token ids, padding mask and segment ids, each sequenceLength long. */
    public final int[] ids;
    public final int[] mask;
    public final int[] segmentIds;
    /** Word pieces of the text (before truncation, counted up to the point where the budget was met). */
    public final int pieces;
    /** Word pieces that are [UNK] among those kept. */
    public final int unknownPieces;
    /** Pieces kept in the packed input (without [CLS]/[SEP]). */
    public final int keptPieces;
    /** True when the text had more pieces than the sequence holds. */
    public final boolean truncated;

    EncodedText(int[] ids, int[] mask, int[] segmentIds, int pieces, int keptPieces, int unknownPieces, boolean truncated) {
        this.ids = ids;
        this.mask = mask;
        this.segmentIds = segmentIds;
        this.pieces = pieces;
        this.keptPieces = keptPieces;
        this.unknownPieces = unknownPieces;
        this.truncated = truncated;
    }

    /** Tokens the model sees, [CLS] and [SEP] included. */
    public int usedLength() {
        int n = 0;
        for (int m : mask) {
            n += m;
        }
        return n;
    }
}
